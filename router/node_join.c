/* node_join.c — see node_join.h. */
#include "router/node_join.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct router_join {
    int required;
    char sha256[65];
};

router_join *router_join_create(const char *key, char *err, size_t es) {
    if (key && *key && strlen(key) < ROUTER_JOIN_KEY_MIN) {
        snprintf(err, es, "--node-join-key is %zu characters; at least %d are required", strlen(key),
                 ROUTER_JOIN_KEY_MIN);
        return NULL;
    }
    router_join *j = calloc(1, sizeof *j);
    if (!j) { snprintf(err, es, "out of memory"); return NULL; }
    if (key && *key) {
        j->required = 1;
        router_auth_hash(key, j->sha256);
    }
    return j;
}

void router_join_destroy(router_join *j) { free(j); }

int router_join_required(const router_join *j) { return j && j->required; }

router_join_verdict router_join_check(const router_join *j, router_auth *auth, const char *bearer,
                                      router_principal *who) {
    int role = router_auth_identify(auth, bearer, who);
    if (!router_join_required(j)) return role == ROUTER_ROLE_NODE ? ROUTER_JOIN_OWN_NODE : ROUTER_JOIN_OPEN;
    if (!bearer || !*bearer) return ROUTER_JOIN_MISSING;
    if (role == ROUTER_ROLE_ADMIN) return ROUTER_JOIN_ADMITTED;
    if (role == ROUTER_ROLE_NODE) return ROUTER_JOIN_OWN_NODE;
    /* Hash first, so the comparison costs the same whatever the key's length. */
    char h[65];
    router_auth_hash(bearer, h);
    if (strlen(bearer) <= 512 && CRYPTO_memcmp(h, j->sha256, 64) == 0) return ROUTER_JOIN_ADMITTED;
    return ROUTER_JOIN_WRONG;
}
