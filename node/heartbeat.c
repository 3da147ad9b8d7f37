/* heartbeat.c — see heartbeat.h. */
#include "node/heartbeat.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/log.h"
#include "node/engine/resource.h"
#include "node/sync.h"

struct llmr_heartbeat {
    llmr_node *n;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void add_ram(json_t *o) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char buf[8192];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    uint64_t total, used;
    if (llmr_meminfo_parse(buf, &total, &used) != 0) return;
    json_object_set_new(o, "ram_total_bytes", json_integer((json_int_t)total));
    json_object_set_new(o, "ram_free_bytes", json_integer((json_int_t)(total - used)));
}

json_t *llmr_heartbeat_body(llmr_node *n) {
    char id[128];
    llmr_router_client_node_id(n->router, id, sizeof id);
    llmr_gpu_inventory_refresh(n->gpus);
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "node_id", json_string(id));
    json_object_set_new(o, "gpus", llmr_gpu_inventory_heartbeat_json(n->gpus));
    add_ram(o);
    json_object_set_new(o, "active_requests", json_integer(atomic_load(&n->active_requests)));
    json_t *alerts = json_array();
    struct statvfs v;
    if (statvfs(n->cfg.models_dir, &v) == 0 && v.f_blocks > 0 && v.f_bavail * 20 < v.f_blocks) {
        char a[512];
        snprintf(a, sizeof a, "disk: %llu bytes free in %s (under 5%%)",
                 (unsigned long long)v.f_bavail * (unsigned long long)v.f_frsize, n->cfg.models_dir);
        json_array_append_new(alerts, json_string(a));
    }
    llmr_node_engines_alerts(n->engines, alerts);
    json_object_set_new(o, "alerts", alerts);
    llmr_node_engines_sync_loaded(n->engines, n->models);
    json_object_set_new(o, "models", llmr_models_json(n->models));
    return o;
}

long llmr_heartbeat_send(llmr_node *n) {
    json_t *body = llmr_heartbeat_body(n);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) return -1;
    llmr_httpc_resp resp = {0};
    char why[1024];
    long status = -1;
    llmr_router_client_trace(n->router, "heartbeat", text, strlen(text));
    if (llmr_router_client_call(n->router, "POST", "/v0/health", text, 10000, &resp, why, sizeof why) == LLMR_HTTPC_OK) {
        status = resp.status;
        if (status >= 200 && status < 300) {
            atomic_fetch_add(&n->heartbeats_ok, 1);
            llmr_router_client_trace(n->router, "heartbeat-response", resp.body, resp.body_len);
            /* A router may send the model list with its answer: treat it as a poll. */
            json_t *doc = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
            json_t *models = json_object_get(doc, "models");
            if (json_is_array(models) && n->sync) llmr_sync_notice(n->sync, NULL, NULL, models);
            json_decref(doc);
        } else {
            atomic_fetch_add(&n->heartbeats_failed, 1);
            llmr_router_error_message(&resp, why, sizeof why);
            log_warn("heartbeat: HTTP %ld: %s", status, why);
            /* 401 already dropped the token; 404: the router forgot this node. Register again. */
            if (status == 404) llmr_router_client_invalidate(n->router);
        }
    } else {
        atomic_fetch_add(&n->heartbeats_failed, 1);
        log_warn("heartbeat: %s", why);
    }
    llmr_httpc_resp_free(&resp);
    free(text);
    return status;
}

static int interval_s(llmr_node *n) {
    if (n->cfg.heartbeat_interval_s > 0) return n->cfg.heartbeat_interval_s;
    llmr_router_settings s;
    llmr_router_client_settings(n->router, &s);
    return s.heartbeat_interval_s > 0 ? s.heartbeat_interval_s : 5;
}

static void *hb_main(void *arg) {
    llmr_heartbeat *hb = arg;
    llmr_node *n = hb->n;
    while (!atomic_load(&n->stop)) {
        if (!llmr_router_client_registered(n->router)) {
            if (llmr_router_client_register(n->router, &n->stop) != 0) break;
            llmr_router_settings s;
            llmr_router_client_settings(n->router, &s);
            llmr_node_engines_allow_cpu(n->engines, s.allow_cpu_engines);
            if (n->sync) llmr_sync_wake(n->sync, 1);
        }
        llmr_heartbeat_send(n);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += interval_s(n);
        pthread_mutex_lock(&hb->mu);
        while (!atomic_load(&n->stop) && llmr_router_client_registered(n->router))
            if (pthread_cond_timedwait(&hb->cv, &hb->mu, &until) != 0) break;
        pthread_mutex_unlock(&hb->mu);
    }
    return NULL;
}

llmr_heartbeat *llmr_heartbeat_create(llmr_node *n, char *err, size_t es) {
    llmr_heartbeat *hb = calloc(1, sizeof *hb);
    if (!hb) { snprintf(err, es, "out of memory"); return NULL; }
    hb->n = n;
    pthread_mutex_init(&hb->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hb->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&hb->th, NULL, hb_main, hb) != 0) {
        snprintf(err, es, "cannot start the heartbeat thread");
        llmr_heartbeat_destroy(hb);
        return NULL;
    }
    hb->started = 1;
    return hb;
}

void llmr_heartbeat_destroy(llmr_heartbeat *hb) {
    if (!hb) return;
    atomic_store(&hb->n->stop, 1);
    pthread_mutex_lock(&hb->mu);
    pthread_cond_broadcast(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
    if (hb->started) pthread_join(hb->th, NULL);
    pthread_cond_destroy(&hb->cv);
    pthread_mutex_destroy(&hb->mu);
    free(hb);
}
