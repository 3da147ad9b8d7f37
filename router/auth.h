/* auth.h — who is calling: the admin key, node tokens, inference API keys.
 *
 * Every key travels as "Authorization: Bearer KEY". Three kinds:
 *   admin    the operator's key (--admin-key / LLMR_ADMIN_KEY), at least 16 characters; only its
 *            sha256 is kept in memory after start-up;
 *   node     "llmr-node-" + 64 hex, issued by POST /v0/nodes; its sha256 is stored in the nodes table;
 *   api      "sk-llmr-" + 48 hex, issued by POST /v0/api-keys (admin); its sha256 is stored in the
 *            api_keys table, the key itself is shown once.
 * A request with a missing or unknown key gets 401; with a valid key of a kind the route does not
 * accept, 403. Keys are compared by hash (constant-time for the admin key).
 *
 * --insecure-no-auth (tests, demos): a request without a recognised key counts as admin and api; a
 * node token still identifies its node, and node routes still require one.
 *
 * Routes added by router_auth_init (admin only):
 *   POST   /v0/api-keys        {"name":"…"} -> 201 {id, name, key, prefix, created_at}
 *   GET    /v0/api-keys        -> {"object":"list","data":[{id, name, prefix, created_at}]}
 *   DELETE /v0/api-keys/{id}   -> {"id":…, "deleted":true}, 404 if unknown */
#ifndef ROUTER_AUTH_H
#define ROUTER_AUTH_H

#include <stddef.h>

#include "common/http_server.h"
#include "router/db.h"

enum { ROUTER_ROLE_ADMIN = 1, ROUTER_ROLE_NODE = 2, ROUTER_ROLE_API = 4 };

#define ROUTER_ADMIN_KEY_MIN 16
#define ROUTER_NODE_TOKEN_PREFIX "llmr-node-"
#define ROUTER_API_KEY_PREFIX "sk-llmr-"

typedef struct router_principal {
    int role;      /* one ROUTER_ROLE_*, or 0 when unknown */
    char id[64];   /* node id or API key id; "" for the admin */
} router_principal;

typedef struct router_auth router_auth; /* opaque */

/* admin_key may be NULL only when insecure is set. NULL with the cause in err (e.g. key too short). */
router_auth *router_auth_create(router_db *db, const char *admin_key, int insecure, char *err, size_t err_size);
/* Accepts NULL. */
void router_auth_destroy(router_auth *a);

/* Classifies a bearer token (may be NULL). Returns the role (0 = unknown) and fills *out. Ignores
 * insecure mode: it reports what the token is. */
int router_auth_identify(router_auth *a, const char *bearer, router_principal *out);

/* Admits the request if its key has one of the roles in the roles mask: returns 1 with *out filled.
 * Otherwise replies 401 (missing/unknown key) or 403 (wrong kind, naming the kinds accepted) and
 * returns 0; the handler must then return without replying. */
int router_auth_require(router_auth *a, llmr_http_request *req, int roles, router_principal *out);

/* Fills out with prefix + 2*n_bytes random hex characters (OpenSSL RAND_bytes). -1 on failure. */
int router_auth_random_token(const char *prefix, size_t n_bytes, char *out, size_t out_size);
/* sha256 of a token, as hex. */
void router_auth_hash(const char *token, char out[65]);

/* Adds the /v0/api-keys routes on srv. Returns 0, -1 if a route could not be added. */
int router_auth_routes(router_auth *a, llmr_http_server *srv);

#endif
