/* auth.c — see auth.h. */
#include "router/auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/sha256.h"

struct router_auth {
    router_db *db;
    int insecure;
    int has_admin;
    char admin_sha256[65];
};

router_auth *router_auth_create(router_db *db, const char *admin_key, int insecure, char *err, size_t es) {
    if (admin_key && !*admin_key) admin_key = NULL;
    if (!admin_key && !insecure) {
        snprintf(err, es, "no admin key: set --admin-key or LLMR_ADMIN_KEY (or run with --insecure-no-auth, "
                          "for tests only)");
        return NULL;
    }
    if (admin_key && strlen(admin_key) < ROUTER_ADMIN_KEY_MIN) {
        snprintf(err, es, "the admin key is %zu characters; at least %d are required", strlen(admin_key),
                 ROUTER_ADMIN_KEY_MIN);
        return NULL;
    }
    router_auth *a = calloc(1, sizeof *a);
    if (!a) { snprintf(err, es, "out of memory"); return NULL; }
    a->db = db;
    a->insecure = insecure;
    if (admin_key) {
        a->has_admin = 1;
        router_auth_hash(admin_key, a->admin_sha256);
    }
    return a;
}

void router_auth_destroy(router_auth *a) { free(a); }

void router_auth_hash(const char *token, char out[65]) { llmr_sha256_buf(token, strlen(token), out); }

int router_auth_random_token(const char *prefix, size_t n, char *out, size_t out_size) {
    unsigned char raw[64];
    size_t pl = strlen(prefix);
    if (n > sizeof raw || pl + 2 * n + 1 > out_size) return -1;
    if (RAND_bytes(raw, (int)n) != 1) return -1;
    memcpy(out, prefix, pl);
    for (size_t i = 0; i < n; i++) snprintf(out + pl + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

int router_auth_identify(router_auth *a, const char *bearer, router_principal *out) {
    memset(out, 0, sizeof *out);
    if (!bearer || !*bearer || strlen(bearer) > 512) return 0;
    char h[65];
    router_auth_hash(bearer, h);
    if (a->has_admin && CRYPTO_memcmp(h, a->admin_sha256, 64) == 0) return out->role = ROUTER_ROLE_ADMIN;
    /* The prefixes only pick which table to look in; the hash lookup decides. */
    if (!strncmp(bearer, ROUTER_NODE_TOKEN_PREFIX, strlen(ROUTER_NODE_TOKEN_PREFIX)) &&
        router_db_node_find_token(a->db, h, out->id, sizeof out->id) == ROUTER_DB_OK)
        return out->role = ROUTER_ROLE_NODE;
    if (!strncmp(bearer, ROUTER_API_KEY_PREFIX, strlen(ROUTER_API_KEY_PREFIX)) &&
        router_db_apikey_find(a->db, h, out->id, sizeof out->id) == ROUTER_DB_OK)
        return out->role = ROUTER_ROLE_API;
    return 0;
}

static const char *role_name(int role) {
    return role == ROUTER_ROLE_ADMIN ? "the admin key" : role == ROUTER_ROLE_NODE ? "a node token" : "an API key";
}

/* "the admin key or a node token" for a mask. */
static void roles_text(int roles, char *buf, size_t n) {
    buf[0] = 0;
    const int all[] = {ROUTER_ROLE_ADMIN, ROUTER_ROLE_NODE, ROUTER_ROLE_API};
    for (int i = 0; i < 3; i++) {
        if (!(roles & all[i])) continue;
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%s", l ? " or " : "", role_name(all[i]));
    }
}

int router_auth_require(router_auth *a, llmr_http_request *req, int roles, router_principal *out) {
    const char *bearer = llmr_http_bearer(req);
    int role = router_auth_identify(a, bearer, out);
    char want[128];
    roles_text(roles, want, sizeof want);
    if (role && (roles & role)) return 1;
    if (!role && a->insecure && (roles & (ROUTER_ROLE_ADMIN | ROUTER_ROLE_API))) {
        out->role = roles & ROUTER_ROLE_ADMIN ? ROUTER_ROLE_ADMIN : ROUTER_ROLE_API;
        return 1;
    }
    if (!role) {
        llmr_http_add_header(req, "WWW-Authenticate", "Bearer");
        if (!bearer)
            llmr_http_reply_error(req, 401, NULL, "missing_api_key", NULL, NULL,
                                  "missing key: send 'Authorization: Bearer KEY' with %s", want);
        else
            llmr_http_reply_error(req, 401, NULL, "invalid_api_key", NULL, NULL,
                                  "the key sent is not valid here; this route needs %s", want);
        return 0;
    }
    llmr_http_reply_error(req, 403, NULL, "wrong_key_kind", NULL, NULL, "%s cannot be used here; this route needs %s",
                          role_name(role), want);
    return 0;
}

/* --- /v0/api-keys ---------------------------------------------------------- */

static void h_create(llmr_http_request *req, void *user) {
    router_auth *a = user;
    router_principal p;
    if (!router_auth_require(a, req, ROUTER_ROLE_ADMIN, &p)) return;
    json_t *body = llmr_http_json_body(req);
    if (!body) return;
    json_t *jn = json_object_get(body, "name");
    const char *name = "";
    if (jn && !json_is_string(jn)) {
        json_decref(body);
        llmr_http_reply_error(req, 400, NULL, "invalid_type", "name", NULL, "'name' must be a string");
        return;
    }
    if (jn) name = json_string_value(jn);
    if (strlen(name) > 128) {
        json_decref(body);
        llmr_http_reply_error(req, 400, NULL, "invalid_value", "name", NULL, "'name' is longer than 128 characters");
        return;
    }
    char key[96], id[32], hash[65], prefix[24], err[512];
    if (router_auth_random_token(ROUTER_API_KEY_PREFIX, 24, key, sizeof key) ||
        router_auth_random_token("key_", 8, id, sizeof id)) {
        json_decref(body);
        llmr_http_reply_error(req, 500, NULL, "internal_error", NULL, NULL, "cannot draw random bytes");
        return;
    }
    router_auth_hash(key, hash);
    snprintf(prefix, sizeof prefix, "%.12s", key);
    int64_t now = (int64_t)time(NULL);
    int rc = router_db_apikey_insert(a->db, id, name, hash, prefix, now, err, sizeof err);
    if (rc) {
        json_decref(body);
        llmr_http_reply_error(req, 500, NULL, "database_error", NULL, NULL, "cannot store the key: %s", err);
        return;
    }
    log_info("api key %s (%s) created", id, name);
    llmr_http_reply_json(req, 201, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "object", "api_key", "id", id, "name",
                                             name, "key", key, "prefix", prefix, "created_at", (json_int_t)now));
    json_decref(body);
}

static void add_key(void *user, const char *id, const char *name, const char *prefix, int64_t created_at) {
    json_array_append_new(user, json_pack("{s:s, s:s, s:s, s:s, s:I}", "object", "api_key", "id", id, "name", name,
                                          "prefix", prefix, "created_at", (json_int_t)created_at));
}

static void h_list(llmr_http_request *req, void *user) {
    router_auth *a = user;
    router_principal p;
    if (!router_auth_require(a, req, ROUTER_ROLE_ADMIN, &p)) return;
    json_t *data = json_array();
    char err[512];
    if (router_db_apikey_each(a->db, add_key, data, err, sizeof err)) {
        json_decref(data);
        llmr_http_reply_error(req, 500, NULL, "database_error", NULL, NULL, "%s", err);
        return;
    }
    llmr_http_reply_json(req, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

static void h_delete(llmr_http_request *req, void *user) {
    router_auth *a = user;
    router_principal p;
    if (!router_auth_require(a, req, ROUTER_ROLE_ADMIN, &p)) return;
    const char *id = llmr_http_path_rest(req);
    char err[512];
    int rc = router_db_apikey_delete(a->db, id, err, sizeof err);
    if (rc == ROUTER_DB_ENOTFOUND) {
        llmr_http_reply_error(req, 404, NULL, "api_key_not_found", NULL, NULL, "%s", err);
        return;
    }
    if (rc) {
        llmr_http_reply_error(req, 500, NULL, "database_error", NULL, NULL, "%s", err);
        return;
    }
    log_info("api key %s deleted", id);
    llmr_http_reply_json(req, 200, json_pack("{s:s, s:s, s:b}", "object", "api_key", "id", id, "deleted", 1));
}

int router_auth_routes(router_auth *a, llmr_http_server *srv) {
    if (llmr_http_server_route(srv, "POST", "/v0/api-keys", h_create, a) ||
        llmr_http_server_route(srv, "GET", "/v0/api-keys", h_list, a) ||
        llmr_http_server_route(srv, "DELETE", "/v0/api-keys/*", h_delete, a))
        return -1;
    return 0;
}
