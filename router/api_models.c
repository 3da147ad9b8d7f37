/* api_models.c — /v0/models* (admin), the manifest route (node token or admin), GET /v1/models.
 *
 * Registration validates against the hub on a worker thread (hub requests block), inserts the
 * record, and only then answers 201 from the loop thread: an answered 201 is a committed row (see
 * db.h for why that survives kill -9). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "router/api_openai.h"
#include "router/nodes.h"
#include "router/registry.h"
#include "router/router.h"

typedef struct reg_job {
    router_ctx *ctx;
    llmr_http_request *req;
    router_register_req in;
    router_verdict v;
    int db_rc;
    char err[1024];
} reg_job;

static void reply_verdict(llmr_http_request *req, router_verdict *v) {
    json_t *extra = v->extra;
    v->extra = NULL;
    llmr_http_reply_error(req, v->status, NULL, v->code, v->param[0] ? v->param : NULL, extra, "%s", v->message);
}

/* Loop thread: answers the registration. */
static void reg_done(void *p) {
    reg_job *j = p;
    if (j->v.status == 201 && j->db_rc == ROUTER_DB_OK) {
        llmr_http_reply_json(j->req, 201, json_incref(j->v.record));
    } else if (j->v.status == 201 && j->db_rc == ROUTER_DB_EEXIST) {
        llmr_http_reply_error(j->req, 409, NULL, "model_already_registered", "repo", NULL,
                              "model '%s' is already registered; DELETE /v0/models/%s first to register it again",
                              j->in.id, j->in.id);
    } else if (j->v.status == 201) {
        llmr_http_reply_error(j->req, 500, NULL, "database_error", NULL, NULL, "cannot store the model: %s", j->err);
    } else {
        reply_verdict(j->req, &j->v);
    }
    router_register_req_free(&j->in);
    router_verdict_free(&j->v);
    free(j);
}

static void *reg_thread(void *p) {
    reg_job *j = p;
    router_ctx *ctx = j->ctx;
    router_validate_env env = {.hub = ctx->hub, .artifacts = ctx->artifacts, .check_template = ctx->check_template};
    router_validate_register(&env, &j->in, &j->v);
    if (j->v.status == 201) {
        j->db_rc = router_registry_add(ctx->db, j->v.record, j->v.chat_template, j->err, sizeof j->err);
        if (j->db_rc == ROUTER_DB_OK) {
            log_info("model %s registered (%s, commit %s)", j->in.id, json_string_value(json_object_get(j->v.record, "format")),
                     json_string_value(json_object_get(j->v.record, "commit")));
            router_sync_push(ctx, "registered", j->in.id);
        }
    } else {
        log_info("registration of %s refused: %d %s: %s", j->in.repo, j->v.status, j->v.code, j->v.message);
    }
    if (llmr_loop_post(ctx->loop, reg_done, j) != 0) log_error("cannot post the registration reply for %s", j->in.id);
    router_job_end(ctx, &ctx->registrations);
    return NULL;
}

static void h_register(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_ADMIN, &who)) return;
    json_t *body = llmr_http_json_body(req);
    if (!body) return;
    reg_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(body);
        llmr_http_reply_error(req, 500, NULL, "internal_error", NULL, NULL, "out of memory");
        return;
    }
    j->ctx = ctx;
    j->req = req;
    int rc = router_register_parse(body, &j->in, &j->v);
    json_decref(body);
    if (rc) {
        reply_verdict(req, &j->v);
        router_verdict_free(&j->v);
        free(j);
        return;
    }
    /* Fail fast on a known id; the INSERT decides for registrations racing each other. */
    char *rec = NULL;
    char err[512];
    if (router_db_model_get(ctx->db, j->in.id, &rec, NULL, err, sizeof err) == ROUTER_DB_OK) {
        free(rec);
        j->v.status = 201;
        j->db_rc = ROUTER_DB_EEXIST;
        reg_done(j);
        return;
    }
    if (router_job_begin(ctx, &ctx->registrations, ctx->cfg.max_registrations) != 0) {
        llmr_http_add_header(req, "Retry-After", "5");
        llmr_http_reply_error(req, 429, NULL, "too_many_registrations", NULL, NULL,
                              "%d registrations are being validated already; retry shortly", ctx->cfg.max_registrations);
        router_register_req_free(&j->in);
        free(j);
        return;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, reg_thread, j) != 0) {
        router_job_end(ctx, &ctx->registrations);
        llmr_http_reply_error(req, 500, NULL, "internal_error", NULL, NULL, "cannot start a worker thread");
        router_register_req_free(&j->in);
        free(j);
    }
    pthread_attr_destroy(&attr);
}

/* The id in a path: lower-cased, checked like a repo name. 0 and replies 400 when invalid. */
static int path_id(llmr_http_request *req, const char *rest, char *id, size_t n) {
    char why[256];
    if (strlen(rest) >= n || !router_repo_name_valid(rest, why, sizeof why)) {
        llmr_http_reply_error(req, 400, NULL, "invalid_repo", NULL, NULL, "invalid model id '%.300s': %s", rest,
                              strlen(rest) >= n ? "too long" : why);
        return 0;
    }
    for (size_t i = 0; rest[i]; i++) id[i] = (char)tolower((unsigned char)rest[i]), id[i + 1] = 0;
    return 1;
}

static void reply_db_error(llmr_http_request *req, int rc, const char *err) {
    if (rc == ROUTER_DB_ENOTFOUND) llmr_http_reply_error(req, 404, NULL, "model_not_found", NULL, NULL, "%s", err);
    else llmr_http_reply_error(req, 500, NULL, "database_error", NULL, NULL, "%s", err);
}

/* Admin, and nodes too: llmr-node polls this list with its token. */
static void h_list(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_ADMIN | ROUTER_ROLE_NODE, &who)) return;
    char err[1024];
    json_t *all = router_registry_list(ctx->db, err, sizeof err);
    if (!all) { reply_db_error(req, ROUTER_DB_EIO, err); return; }
    size_t i;
    json_t *r;
    json_array_foreach(all, i, r)
        json_object_set_new(r, "ready", json_boolean(router_nodes_model_ready(ctx->nodes, json_string_value(json_object_get(r, "id")) ?: "")));
    llmr_http_reply_json(req, 200, json_pack("{s:s, s:o}", "object", "list", "data", all));
}

/* GET /v0/models/registry/{repo}/manifest.json */
static void manifest(llmr_http_request *req, router_ctx *ctx, const char *rest) {
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_ADMIN | ROUTER_ROLE_NODE, &who)) return;
    const char *suffix = "/manifest.json";
    size_t rl = strlen(rest), sl = strlen(suffix);
    char repo[256], id[256], err[1024];
    if (rl <= sl || strcmp(rest + rl - sl, suffix) || rl - sl >= sizeof repo) {
        llmr_http_reply_error(req, 404, NULL, "not_found", NULL, NULL, "no such route: %s (expected "
                              "/v0/models/registry/OWNER/NAME/manifest.json)", llmr_http_path(req));
        return;
    }
    memcpy(repo, rest, rl - sl);
    repo[rl - sl] = 0;
    if (!path_id(req, repo, id, sizeof id)) return;
    json_t *rec;
    int rc = router_registry_get(ctx->db, id, &rec, NULL, err, sizeof err);
    if (rc) { reply_db_error(req, rc, err); return; }
    llmr_http_reply_json(req, 200, router_manifest_from_record(rec));
    json_decref(rec);
}

static void h_model(llmr_http_request *req, void *user) {
    router_ctx *ctx = user;
    const char *rest = llmr_http_path_rest(req);
    /* registry/OWNER/NAME/manifest.json is the manifest; a model owned by "registry" stays reachable. */
    size_t rl = strlen(rest);
    if (!strncmp(rest, "registry/", 9) && ((rl >= 14 && !strcmp(rest + rl - 14, "/manifest.json")) || strchr(rest + 9, '/'))) {
        if (strcmp(llmr_http_method(req), "GET")) {
            llmr_http_add_header(req, "Allow", "GET");
            llmr_http_reply_error(req, 405, NULL, "method_not_allowed", NULL, NULL, "%s is not allowed on %s (allowed: GET)",
                                  llmr_http_method(req), llmr_http_path(req));
            return;
        }
        manifest(req, ctx, rest + 9);
        return;
    }
    if (!strcmp(rest, "register")) {
        llmr_http_add_header(req, "Allow", "POST");
        llmr_http_reply_error(req, 405, NULL, "method_not_allowed", NULL, NULL, "%s is not allowed on %s (allowed: POST)",
                              llmr_http_method(req), llmr_http_path(req));
        return;
    }
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_ADMIN, &who)) return;
    char id[256], err[1024];
    if (!path_id(req, rest, id, sizeof id)) return;
    if (!strcmp(llmr_http_method(req), "DELETE")) {
        int rc = router_registry_delete(ctx->db, id, err, sizeof err);
        if (rc) { reply_db_error(req, rc, err); return; }
        log_info("model %s deleted", id);
        router_sync_push(ctx, "deleted", id);
        llmr_http_reply_json(req, 200, json_pack("{s:s, s:s, s:b}", "object", "model", "id", id, "deleted", 1));
        return;
    }
    json_t *rec;
    int rc = router_registry_get(ctx->db, id, &rec, NULL, err, sizeof err);
    if (rc) { reply_db_error(req, rc, err); return; }
    json_object_set_new(rec, "nodes", router_nodes_model_states(ctx->nodes, id));
    json_object_set_new(rec, "ready", json_boolean(router_nodes_model_ready(ctx->nodes, id)));
    llmr_http_reply_json(req, 200, rec);
}

/* GET /v1/models: OpenAI shape, only models ready on at least one online node. */
static void h_v1_models(llmr_http_request *req, void *user) {
    int64_t t0 = router_nodes_now_ms();
    router_ctx *ctx = user;
    router_principal who;
    if (!router_auth_require(ctx->auth, req, ROUTER_ROLE_API | ROUTER_ROLE_ADMIN, &who)) {
        router_openai_record(ctx, "/v1/models", 401, (router_nodes_now_ms() - t0) / 1e3);
        return;
    }
    char err[1024];
    json_t *all = router_registry_list(ctx->db, err, sizeof err);
    if (!all) { reply_db_error(req, ROUTER_DB_EIO, err); router_openai_record(ctx, "/v1/models", 500, (router_nodes_now_ms() - t0) / 1e3); return; }
    json_t *data = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(all, i, r) {
        const char *id = json_string_value(json_object_get(r, "id"));
        if (!id || !router_nodes_model_ready(ctx->nodes, id)) continue;
        const char *slash = strchr(id, '/');
        json_t *m = json_pack("{s:s, s:s, s:O, s:s#}", "id", id, "object", "model", "created",
                              json_object_get(r, "created_at"), "owned_by", id, (int)(slash ? slash - id : 0));
        if (m) json_array_append_new(data, m);
    }
    json_decref(all);
    llmr_http_reply_json(req, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
    router_openai_record(ctx, "/v1/models", 200, (router_nodes_now_ms() - t0) / 1e3);
}

int router_models_init(router_ctx *ctx, char *err, size_t es) {
    llmr_http_server *s = ctx->http;
    if (llmr_http_server_route(s, "POST", "/v0/models/register", h_register, ctx) ||
        llmr_http_server_route(s, "GET", "/v0/models", h_list, ctx) ||
        llmr_http_server_route(s, "GET", "/v0/models/*", h_model, ctx) ||
        llmr_http_server_route(s, "DELETE", "/v0/models/*", h_model, ctx) ||
        llmr_http_server_route(s, "GET", "/v1/models", h_v1_models, ctx)) {
        snprintf(err, es, "cannot add the model routes (route table full)");
        return -1;
    }
    return 0;
}
