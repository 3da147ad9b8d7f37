/* api.c — see api.h. */
#include "node/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/sync.h"

int llmr_node_api_check_notice(json_t *body, char *err, size_t es) {
    if (!json_is_object(body)) { snprintf(err, es, "body: expected a JSON object"); return -1; }
    json_t *ev = json_object_get(body, "event");
    const char *e = json_string_value(ev);
    if (!e) { snprintf(err, es, "event: %s", ev ? "expected a string" : "missing"); return -1; }
    if (strcmp(e, "registered") != 0 && strcmp(e, "deleted") != 0 && strcmp(e, "resync") != 0) {
        snprintf(err, es, "event: expected registered, deleted or resync, got '%.64s'", e);
        return -1;
    }
    json_t *model = json_object_get(body, "model");
    if (model && !json_is_string(model)) { snprintf(err, es, "model: expected a string"); return -1; }
    json_t *models = json_object_get(body, "models");
    if (!json_is_array(models)) { snprintf(err, es, "models: %s", models ? "expected an array" : "missing"); return -1; }
    size_t i;
    json_t *v;
    json_array_foreach(models, i, v) if (!json_is_string(v)) {
        snprintf(err, es, "models[%zu]: expected a string", i);
        return -1;
    }
    return 0;
}

static void h_sync(llmr_http_request *req, void *user) {
    llmr_node *n = user;
    if (!llmr_router_client_registered(n->router)) {
        llmr_http_reply_error(req, 503, "server_error", "not_registered", NULL, NULL,
                              "this node has not registered with the router yet");
        return;
    }
    if (!llmr_router_client_check_token(n->router, llmr_http_bearer(req))) {
        llmr_http_reply_error(req, 401, "authentication_error", "invalid_node_token", NULL, NULL,
                              "POST /v0/sync needs Authorization: Bearer <this node's token>");
        return;
    }
    json_t *body = llmr_http_json_body(req);
    if (!body) return; /* 400 sent */
    char err[256];
    if (llmr_node_api_check_notice(body, err, sizeof err) != 0) {
        llmr_http_reply_error(req, 400, "invalid_request_error", "invalid_sync_notice", NULL, NULL, "%s", err);
        json_decref(body);
        return;
    }
    size_t blen = 0;
    const char *btext = llmr_http_body(req, &blen);
    llmr_router_client_trace(n->router, "sync-notice", btext, blen); /* accepted notices only */
    atomic_fetch_add(&n->sync_notices, 1);
    llmr_sync_notice(n->sync, json_string_value(json_object_get(body, "event")),
                     json_string_value(json_object_get(body, "model")), json_object_get(body, "models"));
    json_decref(body);
    llmr_http_reply_json(req, 202, json_pack("{s:b}", "accepted", 1));
}

static void h_status(llmr_http_request *req, void *user) {
    llmr_http_reply_json(req, 200, llmr_node_status_json(user));
}

char *llmr_node_metrics_text(llmr_node *n, size_t *len_out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    size_t counts[LLMR_MODEL_STATE_COUNT];
    llmr_models_count(n->models, counts);
    fprintf(f, "# HELP llmr_node_models Models known to this node, by state.\n# TYPE llmr_node_models gauge\n");
    for (int s = 0; s < LLMR_MODEL_STATE_COUNT; s++)
        fprintf(f, "llmr_node_models{state=\"%s\"} %zu\n", llmr_model_state_name((llmr_model_state)s), counts[s]);
    fprintf(f, "# HELP llmr_node_registered 1 while the node holds a valid router token.\n# TYPE llmr_node_registered gauge\n"
               "llmr_node_registered %d\n", llmr_router_client_registered(n->router));
    fprintf(f, "# HELP llmr_node_registrations_total Registrations with the router.\n# TYPE llmr_node_registrations_total counter\n"
               "llmr_node_registrations_total %lu\n", llmr_router_client_registrations(n->router));
#define COUNTER(name, help, field) \
    fprintf(f, "# HELP " name " " help "\n# TYPE " name " counter\n" name " %lu\n", atomic_load(&n->field))
    COUNTER("llmr_node_heartbeats_total", "Heartbeats the router accepted.", heartbeats_ok);
    COUNTER("llmr_node_heartbeat_failures_total", "Heartbeats that failed.", heartbeats_failed);
    COUNTER("llmr_node_sync_notices_total", "Sync notices pushed by the router.", sync_notices);
    COUNTER("llmr_node_manifests_fetched_total", "Model manifests fetched.", manifests_fetched);
    COUNTER("llmr_node_download_bytes_total", "Bytes downloaded.", downloads_bytes);
    COUNTER("llmr_node_download_failures_total", "Model downloads that failed.", downloads_failed);
    COUNTER("llmr_node_verify_failures_total", "Files that failed sha256/size verification.", verify_failures);
#undef COUNTER
    llmr_prune_stats ps;
    llmr_sync_prune_stats(n->sync, &ps);
    fprintf(f, "# HELP llmr_node_models_pruned_total Folders of deleted models removed from --models-dir.\n"
               "# TYPE llmr_node_models_pruned_total counter\nllmr_node_models_pruned_total %llu\n"
               "# HELP llmr_node_pruned_bytes_total Bytes freed by removing deleted models.\n"
               "# TYPE llmr_node_pruned_bytes_total counter\nllmr_node_pruned_bytes_total %llu\n"
               "# HELP llmr_node_prune_failures_total Removals of deleted models that failed.\n"
               "# TYPE llmr_node_prune_failures_total counter\nllmr_node_prune_failures_total %llu\n",
            (unsigned long long)ps.models_removed, (unsigned long long)ps.bytes_freed, (unsigned long long)ps.failures);
    fprintf(f, "# HELP llmr_node_gpus GPUs found.\n# TYPE llmr_node_gpus gauge\nllmr_node_gpus %zu\n",
            llmr_gpu_inventory_count(n->gpus));
    fprintf(f, "# HELP llmr_node_active_requests Inference requests in flight.\n# TYPE llmr_node_active_requests gauge\n"
               "llmr_node_active_requests %d\n", atomic_load(&n->active_requests));
    size_t elen = 0;
    char *engine = llmr_node_engines_metrics(n->engines, &elen);
    if (engine) fwrite(engine, 1, elen, f);
    free(engine);
    if (fclose(f) != 0) { free(buf); return NULL; }
    if (len_out) *len_out = len;
    return buf;
}

static void h_metrics(llmr_http_request *req, void *user) {
    size_t len = 0;
    char *text = llmr_node_metrics_text(user, &len);
    if (!text) {
        llmr_http_reply_error(req, 500, "server_error", NULL, NULL, NULL, "out of memory");
        return;
    }
    llmr_http_reply_text(req, 200, "text/plain; version=0.0.4", text, len);
    free(text);
}

int llmr_node_api_init(llmr_node *n) {
    if (llmr_http_server_route(n->http, "POST", "/v0/sync", h_sync, n) ||
        llmr_http_server_route(n->http, "GET", "/metrics", h_metrics, n) ||
        llmr_http_server_route(n->http, "GET", "/v0/status", h_status, n))
        return -1;
    return 0;
}
