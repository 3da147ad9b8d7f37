/* engine_metrics.c — Prometheus text exposition (format 0.0.4) of the engine host's state, for the
 * node's GET /metrics (declared in engine_host.h). Built only from the host's public snapshots, so it
 * takes no lock of its own. Every family has HELP and TYPE lines; label values are escaped. */
#include "node/engine/engine_host.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes s as a label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *s) {
    for (; s && *s; s++) {
        if (*s == '\\') fputs("\\\\", f);
        else if (*s == '"') fputs("\\\"", f);
        else if (*s == '\n') fputs("\\n", f);
        else fputc(*s, f);
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge_u(FILE *f, const char *name, const char *help, unsigned long long v) {
    family(f, name, "gauge", help);
    fprintf(f, "%s %llu\n", name, v);
}

static void counter_u(FILE *f, const char *name, const char *help, unsigned long long v) {
    family(f, name, "counter", help);
    fprintf(f, "%s %llu\n", name, v);
}

int llmr_engine_host_write_metrics(llmr_engine_host *h, FILE *f) {
    llmr_host_snapshot s;
    llmr_engine_host_snapshot(h, &s);
    const llmr_resource_sample *r = &s.res.last;
    int vram = s.res.valid && r->has_vram, ram = s.res.valid && r->has_ram;

    if (vram) {
        gauge_u(f, "llmr_node_vram_total_bytes", "GPU memory of the device engines use.", r->vram_total);
        gauge_u(f, "llmr_node_vram_used_bytes", "GPU memory in use (all processes).", r->vram_used);
    }
    if (ram) {
        gauge_u(f, "llmr_node_ram_total_bytes", "Host memory (MemTotal).", r->ram_total);
        gauge_u(f, "llmr_node_ram_used_bytes", "Host memory in use (MemTotal - MemAvailable).", r->ram_used);
    }
    family(f, "llmr_node_memory_usage_ratio", "gauge", "Used over total memory, by resource.");
    if (vram) fprintf(f, "llmr_node_memory_usage_ratio{resource=\"vram\"} %.6f\n", s.res.vram_ratio);
    if (ram) fprintf(f, "llmr_node_memory_usage_ratio{resource=\"ram\"} %.6f\n", s.res.ram_ratio);
    family(f, "llmr_node_memory_alert_threshold_ratio", "gauge", "Usage ratio at which alerts fire and LRU unloading starts.");
    fprintf(f, "llmr_node_memory_alert_threshold_ratio %.6f\n", s.res.threshold);
    family(f, "llmr_node_memory_alert", "gauge", "1 while the resource is at or above the alert threshold.");
    fprintf(f, "llmr_node_memory_alert{resource=\"vram\"} %d\n", s.res.vram_alert);
    fprintf(f, "llmr_node_memory_alert{resource=\"ram\"} %d\n", s.res.ram_alert);
    family(f, "llmr_node_memory_alerts_total", "counter", "Alerts raised since start, by resource.");
    fprintf(f, "llmr_node_memory_alerts_total{resource=\"vram\"} %llu\n", (unsigned long long)s.res.vram_alerts_total);
    fprintf(f, "llmr_node_memory_alerts_total{resource=\"ram\"} %llu\n", (unsigned long long)s.res.ram_alerts_total);
    counter_u(f, "llmr_node_resource_sample_failures_total", "Resource polls that could not read memory use.",
              s.res.sample_failures);

    llmr_host_plugin_info *pl = NULL;
    size_t np = 0;
    if (llmr_engine_host_plugins(h, &pl, &np) != 0) return -1;
    family(f, "llmr_engine_plugin_info", "gauge", "Loaded engine plugins (state active, or draining: an old version finishing sessions).");
    for (size_t i = 0; i < np; i++) {
        fputs("llmr_engine_plugin_info{engine=\"", f); label(f, pl[i].id);
        fputs("\",version=\"", f); label(f, pl[i].version);
        fprintf(f, "\",abi=\"%u.%u\",state=\"%s\"} 1\n", pl[i].abi_version >> 16, pl[i].abi_version & 0xffff,
                pl[i].active ? "active" : "draining");
    }
    family(f, "llmr_engine_vram_budget_bytes", "gauge", "VRAM budget per engine (0 = unlimited).");
    for (size_t i = 0; i < np; i++) if (pl[i].active) {
        fputs("llmr_engine_vram_budget_bytes{engine=\"", f); label(f, pl[i].id);
        fprintf(f, "\"} %llu\n", (unsigned long long)pl[i].vram_budget);
    }
    family(f, "llmr_engine_vram_bytes", "gauge", "VRAM the engine's models report holding.");
    for (size_t i = 0; i < np; i++) {
        fputs("llmr_engine_vram_bytes{engine=\"", f); label(f, pl[i].id);
        fputs("\",version=\"", f); label(f, pl[i].version);
        fprintf(f, "\"} %llu\n", (unsigned long long)pl[i].vram_bytes);
    }
    family(f, "llmr_engine_over_budget", "gauge", "1 when an engine's models hold more VRAM than its budget.");
    for (size_t i = 0; i < np; i++) if (pl[i].active) {
        fputs("llmr_engine_over_budget{engine=\"", f); label(f, pl[i].id);
        fprintf(f, "\"} %d\n", pl[i].over_budget);
    }
    free(pl);

    llmr_host_model_info *ms = NULL;
    size_t nm = 0;
    if (llmr_engine_host_models(h, &ms, &nm) != 0) return -1;
    gauge_u(f, "llmr_models_loaded", "Models with a loaded current instance.", s.models_loaded);
    family(f, "llmr_model_loaded", "gauge", "1 when the model is loaded (0 after an LRU unload), by engine.");
    for (size_t i = 0; i < nm; i++) {
        fputs("llmr_model_loaded{model=\"", f); label(f, ms[i].model_id);
        fputs("\",engine=\"", f); label(f, ms[i].engine_id);
        fputs("\",version=\"", f); label(f, ms[i].engine_version);
        fprintf(f, "\"} %d\n", ms[i].loaded);
    }
    family(f, "llmr_model_vram_bytes", "gauge", "VRAM the model's current instance reports.");
    for (size_t i = 0; i < nm; i++) if (ms[i].loaded) {
        fputs("llmr_model_vram_bytes{model=\"", f); label(f, ms[i].model_id);
        fprintf(f, "\"} %llu\n", (unsigned long long)ms[i].vram_bytes);
    }
    family(f, "llmr_model_sessions", "gauge", "Open sessions per model (all instances).");
    for (size_t i = 0; i < nm; i++) {
        fputs("llmr_model_sessions{model=\"", f); label(f, ms[i].model_id);
        fprintf(f, "\"} %u\n", ms[i].sessions);
    }
    family(f, "llmr_model_tokens_generated_total", "counter", "Tokens generated per model.");
    for (size_t i = 0; i < nm; i++) {
        fputs("llmr_model_tokens_generated_total{model=\"", f); label(f, ms[i].model_id);
        fprintf(f, "\"} %llu\n", (unsigned long long)ms[i].tokens_generated);
    }
    free(ms);

    gauge_u(f, "llmr_sessions_active", "Open sessions on all models.", s.sessions_active);
    gauge_u(f, "llmr_generations_running", "Generate calls in progress.", s.generations_running);
    counter_u(f, "llmr_tokens_generated_total", "Tokens generated on this node.", s.tokens_generated_total);
    counter_u(f, "llmr_watchdog_timeouts_total", "Generations cancelled by the stall watchdog.", s.watchdog_timeouts_total);
    counter_u(f, "llmr_lru_unloads_total", "Models unloaded to get under the memory threshold.", s.lru_unloads_total);
    counter_u(f, "llmr_load_refusals_total", "Loads refused for lack of VRAM (free memory or budget).", s.load_refusals_total);
    counter_u(f, "llmr_engine_plugin_rejections_total", "Plugins rejected at scan (manifest, ABI, library).", s.plugin_rejections_total);
    counter_u(f, "llmr_engine_reloads_total", "Plugin folder rescans (start, file change, SIGHUP).", s.reloads_total);
    counter_u(f, "llmr_engine_budget_overruns_total", "Times an engine was found above its VRAM budget.", s.budget_overruns_total);
    return ferror(f) ? -1 : 0;
}

char *llmr_engine_host_metrics_text(llmr_engine_host *h, size_t *len_out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int rc = llmr_engine_host_write_metrics(h, f);
    if (fclose(f) != 0 || rc != 0) { free(buf); return NULL; }
    if (len_out) *len_out = len;
    return buf;
}

/* Adds v to array a (takes the reference); returns -1 when either is NULL. */
static int push(json_t *a, json_t *v) { return a && v ? json_array_append_new(a, v) : -1; }

json_t *llmr_engine_host_heartbeat_json(llmr_engine_host *h) {
    llmr_host_snapshot s;
    llmr_engine_host_snapshot(h, &s);
    const llmr_resource_sample *r = &s.res.last;
    json_t *o = json_object(), *gpus = json_array(), *alerts = json_array(), *models = json_array();
    int bad = !o || !gpus || !alerts || !models;
    if (!bad && s.res.valid && r->has_vram)
        bad |= push(gpus, json_pack("{s:i, s:I, s:I}", "index", s.device > 0 ? s.device : 0, "memory_total_bytes", (json_int_t)r->vram_total,
                                    "memory_free_bytes", (json_int_t)(r->vram_total > r->vram_used ? r->vram_total - r->vram_used : 0))) != 0;
    if (!bad && s.res.valid && r->has_ram) {
        bad |= json_object_set_new(o, "ram_total_bytes", json_integer((json_int_t)r->ram_total)) != 0;
        bad |= json_object_set_new(o, "ram_free_bytes", json_integer((json_int_t)(r->ram_total > r->ram_used ? r->ram_total - r->ram_used : 0))) != 0;
    }
    char line[160];
    if (!bad && s.res.vram_alert) {
        snprintf(line, sizeof line, "vram_high: VRAM use %.1f%% >= %.0f%%", s.res.vram_ratio * 100, s.res.threshold * 100);
        bad |= push(alerts, json_string(line)) != 0;
    }
    if (!bad && s.res.ram_alert) {
        snprintf(line, sizeof line, "ram_high: RAM use %.1f%% >= %.0f%%", s.res.ram_ratio * 100, s.res.threshold * 100);
        bad |= push(alerts, json_string(line)) != 0;
    }
    llmr_host_plugin_info *pl = NULL;
    size_t np = 0;
    if (!bad && llmr_engine_host_plugins(h, &pl, &np) == 0) {
        for (size_t i = 0; i < np && !bad; i++)
            if (pl[i].active && pl[i].over_budget) {
                snprintf(line, sizeof line, "engine_over_budget: %s", pl[i].id);
                bad |= push(alerts, json_string(line)) != 0;
            }
        free(pl);
    } else bad = 1;
    llmr_host_model_info *ms = NULL;
    size_t nm = 0;
    if (!bad && llmr_engine_host_models(h, &ms, &nm) == 0) {
        for (size_t i = 0; i < nm && !bad; i++) {
            const llmr_host_model_info *m = &ms[i];
            const char *state = m->loaded ? "ready" : m->loading ? "loading"
                              : m->last_status == LLMR_ENGINE_UNSUPPORTED ? "unsupported"
                              : m->last_status != LLMR_ENGINE_OK ? "failed" : "pending";
            json_t *jm = json_pack("{s:s, s:s, s:b}", "id", m->model_id, "state", state, "loaded", m->loaded);
            if (jm && m->engine_id[0]) json_object_set_new(jm, "engine", json_string(m->engine_id));
            if (jm && !m->loaded && m->last_error[0]) json_object_set_new(jm, "reason", json_string(m->last_error));
            bad |= push(models, jm) != 0;
        }
        free(ms);
    } else bad = 1;
    if (!bad) {
        bad |= json_object_set(o, "gpus", gpus) != 0;
        bad |= json_object_set(o, "alerts", alerts) != 0;
        bad |= json_object_set(o, "models", models) != 0;
    }
    json_decref(gpus);
    json_decref(alerts);
    json_decref(models);
    if (bad) { json_decref(o); return NULL; }
    return o;
}
