/* api_nodes.c — POST /v0/nodes, GET /v0/nodes, POST /v0/health, the heartbeat watchdog, and the
 * /v0/sync pushes to nodes; also the worker-thread bookkeeping shared by the router's modules. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/http_client.h"
#include "common/log.h"
#include "router/node_join.h"
#include "router/nodes.h"
#include "router/registry.h"
#include "router/router.h"

static struct event *g_watchdog; /* one router per process */

/* --- worker jobs ------------------------------------------------------------------------- */

int router_job_begin(router_ctx *ctx, int *counter, int limit) {
    pthread_mutex_lock(&ctx->jobs_mu);
    int ok = !counter || limit <= 0 || *counter < limit;
    if (ok) {
        ctx->jobs++;
        if (counter) (*counter)++;
    }
    pthread_mutex_unlock(&ctx->jobs_mu);
    return ok ? 0 : -1;
}

void router_job_end(router_ctx *ctx, int *counter) {
    pthread_mutex_lock(&ctx->jobs_mu);
    ctx->jobs--;
    if (counter) (*counter)--;
    pthread_cond_broadcast(&ctx->jobs_cv);
    pthread_mutex_unlock(&ctx->jobs_mu);
}

int router_jobs_wait(router_ctx *ctx, int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&ctx->jobs_mu);
    while (ctx->jobs > 0)
        if (pthread_cond_timedwait(&ctx->jobs_cv, &ctx->jobs_mu, &deadline) != 0) break;
    int left = ctx->jobs;
    pthread_mutex_unlock(&ctx->jobs_mu);
    return left;
}

/* --- handlers ------------------------------------------------------------------------------ */

static void h_register(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    /* Without --node-join-key joining is open; with it, the join key, the admin key or the node's
     * own token is required (router/node_join.h). A node token may only re-register its node. */
    router_principal who;
    router_join_verdict v = router_join_check(ctx->join, ctx->auth, llmr_http_bearer(req), &who);
    if (v == ROUTER_JOIN_MISSING || v == ROUTER_JOIN_WRONG) {
        if (v == ROUTER_JOIN_MISSING) llmr_http_add_header(req, "WWW-Authenticate", "Bearer");
        llmr_http_reply_error(req, v == ROUTER_JOIN_MISSING ? 401 : 403, NULL,
                              v == ROUTER_JOIN_MISSING ? "missing_api_key" : "invalid_join_key", NULL, NULL,
                              "this router requires a node join key (--node-join-key) to register a node: %s",
                              v == ROUTER_JOIN_MISSING ? "send it as 'Authorization: Bearer KEY'"
                                                       : "the key sent is not the join key, the admin key or a node token");
        return;
    }
    json_t *body = llmr_http_json_body(req);
    if (!body) return;
    char id[64], token[128], param[32], err[1024];
    if (v == ROUTER_JOIN_OWN_NODE) {
        const char *claimed = json_string_value(json_object_get(body, "node_id"));
        if (claimed && strcmp(claimed, who.id)) {
            llmr_http_reply_error(req, 403, NULL, "wrong_node", "node_id", NULL,
                                  "this token belongs to node '%s', not '%.63s'", who.id, claimed);
            json_decref(body);
            return;
        }
        json_object_set_new(body, "node_id", json_string(who.id));
    }
    /* A node that advertises a wildcard address is reached where its request came from. */
    const char *addr = json_string_value(json_object_get(body, "address"));
    if (addr && (!strcmp(addr, "0.0.0.0") || !strcmp(addr, "::") || !strcmp(addr, "[::]")) && llmr_http_peer(req))
        json_object_set_new(body, "address", json_string(llmr_http_peer(req)));
    int rc = router_nodes_register(ctx->nodes, body, ctx->cfg.allow_cpu_nodes, id, sizeof id, token, sizeof token, param,
                                   err, sizeof err);
    json_decref(body);
    if (rc == ROUTER_NODES_EINVAL) {
        llmr_http_reply_error(req, 400, NULL, "invalid_node_registration", param[0] ? param : NULL, NULL, "%s", err);
        return;
    }
    if (rc == ROUTER_NODES_ENOGPU) {
        llmr_http_reply_error(req, 403, NULL, "gpu_required", "gpus", NULL, "%s", err);
        return;
    }
    if (rc) {
        llmr_http_reply_error(req, 500, NULL, "internal_error", NULL, NULL, "cannot register the node: %s", err);
        return;
    }
    json_t *settings = json_pack("{s:b, s:i, s:i, s:i}", "allow_cpu_engines", ctx->cfg.allow_cpu_nodes,
                                 "heartbeat_interval_s", ctx->cfg.heartbeat_interval_s, "heartbeat_timeout_s",
                                 ctx->cfg.heartbeat_timeout_s, "sync_interval_s", ctx->cfg.sync_interval_s);
    llmr_http_reply_json(req, 201, json_pack("{s:s, s:s, s:o}", "node_id", id, "node_token", token, "settings", settings));
}

static void h_list(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_ADMIN, &who)) return;
    llmr_http_reply_json(req, 200, router_nodes_list_json(ctx->nodes));
}

static void h_health(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_NODE, &who)) return;
    json_t *body = llmr_http_json_body(req);
    if (!body) return;
    char param[32] = "", err[1024];
    int rc = router_nodes_heartbeat(ctx->nodes, who.id, llmr_http_bearer(req), body, param, err, sizeof err);
    json_decref(body);
    if (rc == ROUTER_NODES_EINVAL) {
        llmr_http_reply_error(req, 400, NULL, "invalid_heartbeat", param[0] ? param : NULL, NULL, "%s", err);
    } else if (rc == ROUTER_NODES_EFORBIDDEN) {
        llmr_http_reply_error(req, 403, NULL, "wrong_node", "node_id", NULL, "%s", err);
    } else if (rc == ROUTER_NODES_ENOTFOUND) {
        llmr_http_reply_error(req, 404, NULL, "node_not_found", NULL, NULL, "%s", err);
    } else if (rc) {
        llmr_http_reply_error(req, 500, NULL, "internal_error", NULL, NULL, "%s", err);
    } else {
        /* The registered ids ride along, so a heartbeat doubles as a poll for the node. When the registry
         * cannot be read the list is left out, never sent empty: nodes prune what the list lacks. */
        json_t *ids = router_registry_ids(ctx->db, err, sizeof err);
        json_t *reply = json_pack("{s:b, s:i}", "ok", 1, "heartbeat_interval_s", ctx->cfg.heartbeat_interval_s);
        if (ids) json_object_set_new(reply, "models", ids);
        else log_warn("heartbeat reply without the model list: reading the registry failed: %s", err);
        llmr_http_reply_json(req, 200, reply);
    }
}

static void on_watchdog(void *p) {
    router_ctx *ctx = p;
    router_nodes_check(ctx->nodes, router_nodes_now_ms());
}

int router_nodes_init(router_ctx *ctx, char *err, size_t es) {
    if (!(ctx->nodes = router_nodes_create(ctx->db, ctx->cfg.heartbeat_timeout_s, err, es))) return -1;
    llmr_http_server *s = ctx->http;
    if (llmr_http_server_route(s, "POST", "/v0/nodes", h_register, ctx) ||
        llmr_http_server_route(s, "GET", "/v0/nodes", h_list, ctx) ||
        llmr_http_server_route(s, "POST", "/v0/health", h_health, ctx)) {
        snprintf(err, es, "cannot add the node routes (route table full)");
        return -1;
    }
    /* Check often enough that "offline" shows within ~1 s of the timeout. */
    if (!(g_watchdog = llmr_loop_every(ctx->loop, 1000, on_watchdog, ctx))) {
        snprintf(err, es, "cannot start the heartbeat watchdog timer");
        return -1;
    }
    return 0;
}

void router_nodes_fini(router_ctx *ctx) {
    if (g_watchdog) llmr_loop_timer_free(g_watchdog);
    g_watchdog = NULL;
    router_nodes_destroy(ctx->nodes);
    ctx->nodes = NULL;
}

/* --- /v0/sync pushes ------------------------------------------------------------------------- */

typedef struct push_job {
    router_ctx *ctx;
    char *body;
    router_node_target *targets;
    size_t n;
} push_job;

/* One POST; the node answers 2xx when it accepted the notice. No retry: nodes also poll. */
static void push_one(const router_node_target *t, const char *body) {
    char url[400], err[1024];
    snprintf(url, sizeof url, "%s/v0/sync", t->base_url);
    llmr_httpc_opts o = {.connect_timeout_ms = 3000, .timeout_ms = 10000, .retries = -1, .bearer_token = t->token};
    llmr_httpc *c = llmr_httpc_create(&o);
    if (!c) return;
    llmr_httpc_resp resp = {0};
    llmr_httpc_status st = llmr_httpc_post_json(c, url, body, &resp, err, sizeof err);
    if (st != LLMR_HTTPC_OK) log_warn("sync push to node %s failed: %s; it will catch up by polling", t->id, err);
    else if (resp.status / 100 != 2) log_warn("sync push to node %s (%s): HTTP %ld", t->id, url, resp.status);
    else log_debug("sync push to node %s: HTTP %ld", t->id, resp.status);
    llmr_httpc_resp_free(&resp);
    llmr_httpc_destroy(c);
}

static void *push_thread(void *p) {
    push_job *j = p;
    for (size_t i = 0; i < j->n; i++) push_one(&j->targets[i], j->body);
    router_ctx *ctx = j->ctx;
    free(j->targets);
    free(j->body);
    free(j);
    router_job_end(ctx, NULL);
    return NULL;
}

void router_sync_push(router_ctx *ctx, const char *event, const char *model) {
    router_node_target *targets;
    size_t n = router_nodes_targets(ctx->nodes, &targets);
    if (!n) { free(targets); return; }
    char err[512];
    json_t *ids = router_registry_ids(ctx->db, err, sizeof err);
    if (!ids) { /* an empty list would make nodes prune every model: they catch up by polling instead */
        log_warn("not pushing the %s notice to nodes: reading the registry failed: %s", event, err);
        free(targets);
        return;
    }
    json_t *msg = json_pack("{s:s, s:o}", "event", event, "models", ids);
    if (model && msg) json_object_set_new(msg, "model", json_string(model));
    push_job *j = calloc(1, sizeof *j);
    char *body = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (!j || !body || router_job_begin(ctx, NULL, 0)) {
        log_warn("cannot push the %s notice to nodes (out of memory); they will catch up by polling", event);
        free(j), free(body), free(targets);
        return;
    }
    *j = (push_job){.ctx = ctx, .body = body, .targets = targets, .n = n};
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, push_thread, j) != 0) {
        log_warn("cannot start the sync push thread; nodes will catch up by polling");
        free(j->targets), free(j->body), free(j);
        router_job_end(ctx, NULL);
    }
    pthread_attr_destroy(&attr);
}
