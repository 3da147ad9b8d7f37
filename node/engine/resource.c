/* resource.c — see resource.h. */
#include "node/engine/resource.h"
#include "common/log.h"
#include "node/gpu/nvml.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void llmr_resource_provider_destroy(llmr_resource_provider *p) {
    if (!p) return;
    if (p->destroy) p->destroy(p->ctx);
    free(p);
}

int llmr_meminfo_parse(const char *text, uint64_t *total, uint64_t *used) {
    uint64_t mem_total = 0, avail = 0, mfree = 0, buffers = 0, cached = 0;
    int have_total = 0, have_avail = 0;
    const char *p = text;
    while (p && *p) {
        char key[64];
        unsigned long long kb;
        if (sscanf(p, "%63[^:]: %llu", key, &kb) == 2) {
            if (strcmp(key, "MemTotal") == 0) { mem_total = kb * 1024; have_total = 1; }
            else if (strcmp(key, "MemAvailable") == 0) { avail = kb * 1024; have_avail = 1; }
            else if (strcmp(key, "MemFree") == 0) mfree = kb * 1024;
            else if (strcmp(key, "Buffers") == 0) buffers = kb * 1024;
            else if (strcmp(key, "Cached") == 0) cached = kb * 1024;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!have_total) return -1;
    if (!have_avail) avail = mfree + buffers + cached;
    if (avail > mem_total) avail = mem_total;
    *total = mem_total;
    *used = mem_total - avail;
    return 0;
}

/* --- system provider --------------------------------------------------------------------------- */

typedef struct system_ctx {
    llmr_nvml *nvml;        /* NULL: no VRAM */
    unsigned device;
    int warned;             /* NVML read errors are logged once */
} system_ctx;

static int read_meminfo(uint64_t *total, uint64_t *used, char *err, size_t err_size) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) { snprintf(err, err_size, "/proc/meminfo: %s", strerror(errno)); return -1; }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (llmr_meminfo_parse(buf, total, used) != 0) {
        snprintf(err, err_size, "/proc/meminfo: no MemTotal line");
        return -1;
    }
    return 0;
}

static int system_sample(void *vctx, llmr_resource_sample *out, char *err, size_t err_size) {
    system_ctx *c = vctx;
    memset(out, 0, sizeof *out);
    char e1[256] = "", e2[256] = "";
    if (read_meminfo(&out->ram_total, &out->ram_used, e1, sizeof e1) == 0) out->has_ram = 1;
    if (c->nvml) {
        if (llmr_nvml_memory(c->nvml, c->device, &out->vram_total, &out->vram_used, e2, sizeof e2) == 0)
            out->has_vram = 1;
        else if (!c->warned) {
            c->warned = 1;
            log_warn("resource: GPU %u memory unreadable: %s", c->device, e2);
        }
    }
    if (!out->has_ram && !out->has_vram) {
        snprintf(err, err_size, "%s%s%s", e1, e2[0] ? "; " : "", e2);
        return -1;
    }
    return 0;
}

static void system_destroy(void *vctx) {
    system_ctx *c = vctx;
    if (!c) return;
    llmr_nvml_close(c->nvml);
    free(c);
}

llmr_resource_provider *llmr_resource_provider_system_create(unsigned device, char *note, size_t note_size) {
    llmr_resource_provider *p = calloc(1, sizeof *p);
    system_ctx *c = calloc(1, sizeof *c);
    if (!p || !c) { free(p); free(c); return NULL; }
    char err[512] = "";
    c->device = device;
    c->nvml = llmr_nvml_open(err, sizeof err);
    if (c->nvml) {
        unsigned count = 0;
        if (llmr_nvml_device_count(c->nvml, &count, err, sizeof err) != 0 || device >= count) {
            if (!err[0] || device >= count) snprintf(err, sizeof err, "GPU %u not present (NVML sees %u)", device, count);
            llmr_nvml_close(c->nvml);
            c->nvml = NULL;
        }
    }
    if (note && note_size) snprintf(note, note_size, "%s", c->nvml ? "" : err);
    p->name = c->nvml ? "nvml+meminfo" : "meminfo";
    p->ctx = c;
    p->sample = system_sample;
    p->destroy = system_destroy;
    return p;
}

/* --- fake provider ----------------------------------------------------------------------------- */

typedef struct fake_ctx {
    pthread_mutex_t mu;
    llmr_resource_sample s;
    uint64_t (*vram_fn)(void *);
    void *vram_user;
    char fail[256];
} fake_ctx;

static int fake_sample(void *vctx, llmr_resource_sample *out, char *err, size_t err_size) {
    fake_ctx *c = vctx;
    pthread_mutex_lock(&c->mu);
    llmr_resource_sample s = c->s;
    uint64_t (*fn)(void *) = c->vram_fn;
    void *user = c->vram_user;
    char fail[256];
    memcpy(fail, c->fail, sizeof fail);
    pthread_mutex_unlock(&c->mu);
    if (fail[0]) { snprintf(err, err_size, "%s", fail); return -1; }
    if (fn) s.vram_used += fn(user);   /* outside the lock: fn may take other locks */
    *out = s;
    return 0;
}

static void fake_destroy(void *vctx) {
    fake_ctx *c = vctx;
    if (!c) return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

llmr_resource_provider *llmr_resource_provider_fake_create(void) {
    llmr_resource_provider *p = calloc(1, sizeof *p);
    fake_ctx *c = calloc(1, sizeof *c);
    if (!p || !c) { free(p); free(c); return NULL; }
    pthread_mutex_init(&c->mu, NULL);
    c->s.has_vram = c->s.has_ram = 1;
    p->name = "fake";
    p->ctx = c;
    p->sample = fake_sample;
    p->destroy = fake_destroy;
    return p;
}

void llmr_resource_fake_set(llmr_resource_provider *p, uint64_t vt, uint64_t vu, uint64_t rt, uint64_t ru) {
    fake_ctx *c = p->ctx;
    pthread_mutex_lock(&c->mu);
    c->s.vram_total = vt; c->s.vram_used = vu; c->s.ram_total = rt; c->s.ram_used = ru;
    pthread_mutex_unlock(&c->mu);
}

void llmr_resource_fake_set_vram_fn(llmr_resource_provider *p, uint64_t (*fn)(void *), void *user) {
    fake_ctx *c = p->ctx;
    pthread_mutex_lock(&c->mu);
    c->vram_fn = fn;
    c->vram_user = user;
    pthread_mutex_unlock(&c->mu);
}

void llmr_resource_fake_fail(llmr_resource_provider *p, const char *message) {
    fake_ctx *c = p->ctx;
    pthread_mutex_lock(&c->mu);
    snprintf(c->fail, sizeof c->fail, "%s", message ? message : "");
    pthread_mutex_unlock(&c->mu);
}

/* --- monitor ----------------------------------------------------------------------------------- */

struct llmr_resource_monitor {
    pthread_mutex_t mu;          /* guards state; also serialises provider->sample */
    llmr_resource_provider *provider;
    llmr_resource_state state;
};

llmr_resource_monitor *llmr_resource_monitor_create(llmr_resource_provider *provider, double threshold) {
    llmr_resource_monitor *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->provider = provider;
    m->state.threshold = threshold > 0 && threshold <= 1 ? threshold : 0.9;
    return m;
}

void llmr_resource_monitor_destroy(llmr_resource_monitor *m) {
    if (!m) return;
    llmr_resource_provider_destroy(m->provider);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static double ratio(uint64_t used, uint64_t total) { return total ? (double)used / (double)total : 0.0; }

/* Updates one alert flag; logs on transitions only, so a long alert is one line, not one per second. */
static void update_alert(int *flag, uint64_t *count, int has, double r, double threshold, const char *what,
                         uint64_t used, uint64_t total) {
    int now = has && total && r >= threshold;
    if (now && !*flag) {
        (*count)++;
        log_warn("resource alert: %s use %.1f%% (%llu of %llu bytes) is at or above the %.0f%% threshold", what,
                 r * 100, (unsigned long long)used, (unsigned long long)total, threshold * 100);
    } else if (!now && *flag) {
        log_info("resource alert cleared: %s use %.1f%% is below the %.0f%% threshold", what, r * 100, threshold * 100);
    }
    *flag = now;
}

int llmr_resource_monitor_poll(llmr_resource_monitor *m, llmr_resource_state *out, char *err, size_t err_size) {
    llmr_resource_sample s;
    char e[512] = "";
    pthread_mutex_lock(&m->mu);
    int rc = m->provider->sample(m->provider->ctx, &s, e, sizeof e);
    llmr_resource_state *st = &m->state;
    if (rc != 0) {
        st->sample_failures++;
        if (err && err_size) snprintf(err, err_size, "resource provider %s: %s", m->provider->name, e);
    } else {
        st->last = s;
        st->valid = 1;
        st->vram_ratio = s.has_vram ? ratio(s.vram_used, s.vram_total) : 0;
        st->ram_ratio = s.has_ram ? ratio(s.ram_used, s.ram_total) : 0;
        update_alert(&st->vram_alert, &st->vram_alerts_total, s.has_vram, st->vram_ratio, st->threshold, "VRAM",
                     s.vram_used, s.vram_total);
        update_alert(&st->ram_alert, &st->ram_alerts_total, s.has_ram, st->ram_ratio, st->threshold, "RAM",
                     s.ram_used, s.ram_total);
    }
    if (out) *out = *st;
    pthread_mutex_unlock(&m->mu);
    return rc == 0 ? 0 : -1;
}

void llmr_resource_monitor_state(llmr_resource_monitor *m, llmr_resource_state *out) {
    pthread_mutex_lock(&m->mu);
    *out = m->state;
    pthread_mutex_unlock(&m->mu);
}
