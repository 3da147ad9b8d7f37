/* node.c — the node-wide documents: registration body and status. */
#include "node/node.h"

#include <stdio.h>
#include <string.h>

#include "node/sync.h"

json_t *llmr_node_register_body(void *arg) {
    llmr_node *n = arg;
    llmr_gpu_inventory_refresh(n->gpus);
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "machine_name", json_string(n->machine_name));
    json_object_set_new(o, "address", json_string(n->address));
    json_object_set_new(o, "port", json_integer(n->port));
    json_object_set_new(o, "version", json_string("0.1.0"));
    json_object_set_new(o, "max_concurrency", json_integer(n->cfg.max_concurrency));
    json_object_set_new(o, "gpus", llmr_gpu_inventory_register_json(n->gpus));
    json_object_set_new(o, "engines", llmr_node_engines_json(n->engines));
    return o;
}

json_t *llmr_node_status_json(llmr_node *n) {
    char id[128];
    llmr_router_settings s;
    llmr_router_client_node_id(n->router, id, sizeof id);
    llmr_router_client_settings(n->router, &s);
    json_t *o = json_object();
    json_object_set_new(o, "node_id", json_string(id));
    json_object_set_new(o, "registered", json_boolean(llmr_router_client_registered(n->router)));
    json_object_set_new(o, "router", json_string(llmr_router_client_url(n->router)));
    json_object_set_new(o, "machine_name", json_string(n->machine_name));
    json_object_set_new(o, "address", json_string(n->address));
    json_object_set_new(o, "port", json_integer(n->port));
    json_object_set_new(o, "uptime_seconds", json_integer((json_int_t)(time(NULL) - n->started_at)));
    json_object_set_new(o, "allow_cpu_engines", json_boolean(s.allow_cpu_engines));
    json_object_set_new(o, "gpus", llmr_gpu_inventory_register_json(n->gpus));
    if (llmr_gpu_inventory_note(n->gpus)[0]) json_object_set_new(o, "gpu_note", json_string(llmr_gpu_inventory_note(n->gpus)));
    json_object_set_new(o, "engines", llmr_node_engines_json(n->engines));
    json_object_set_new(o, "active_requests", json_integer(atomic_load(&n->active_requests)));
    json_object_set_new(o, "models", llmr_models_json(n->models));
    json_object_set_new(o, "deleting", llmr_sync_deleting_json(n->sync));
    json_object_set_new(o, "keep_deleted_models", json_boolean(n->cfg.keep_deleted_models));
    return o;
}

void llmr_node_model_dir(const llmr_node *n, const char *id, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", n->cfg.models_dir, id);
}
