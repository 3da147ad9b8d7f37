/* node_join.h — who may call POST /v0/nodes (the node join key, --node-join-key).
 *
 * Without a join key, joining is open (the router logs a warning at start): any caller may register
 * a new node, and a caller that sends a node token may only re-register that node.
 * With a join key, the request must carry "Authorization: Bearer KEY" where KEY is one of
 *   the join key     any registration, including re-registering any known node_id;
 *   the admin key    the same;
 *   a node token     only a re-registration of that token's own node (the handler pins node_id).
 * No key -> 401 missing_api_key; any other key (unknown, an API key) -> 403 invalid_join_key.
 * Keys are compared by sha256 in constant time; only the hash of the join key is kept. */
#ifndef ROUTER_NODE_JOIN_H
#define ROUTER_NODE_JOIN_H

#include <stddef.h>

#include "router/auth.h"

#define ROUTER_JOIN_KEY_MIN 16

typedef struct router_join router_join; /* opaque */

typedef enum router_join_verdict {
    ROUTER_JOIN_OPEN = 0,    /* no join key configured: proceed as before (open joining) */
    ROUTER_JOIN_ADMITTED,    /* the join key or the admin key: any registration */
    ROUTER_JOIN_OWN_NODE,    /* a node token: only that node (who->id) may be re-registered */
    ROUTER_JOIN_MISSING,     /* a join key is required and none was sent: answer 401 */
    ROUTER_JOIN_WRONG        /* a key was sent that admits nothing: answer 403 */
} router_join_verdict;

/* key may be NULL or "" (open joining). NULL with the cause in err when the key is shorter than
 * ROUTER_JOIN_KEY_MIN characters or memory runs out. */
router_join *router_join_create(const char *key, char *err, size_t err_size);
/* Accepts NULL. */
void router_join_destroy(router_join *j);
/* 1 when a join key is configured. */
int router_join_required(const router_join *j);

/* Decides for one POST /v0/nodes: bearer (may be NULL) is classified by auth (admin, node token) and
 * against the join key. *who is filled as router_auth_identify does (role 0 for the join key).
 * Without a join key the verdict is ROUTER_JOIN_OPEN, or ROUTER_JOIN_OWN_NODE for a node token, so
 * the handler keeps pinning a node token to its own node. */
router_join_verdict router_join_check(const router_join *j, router_auth *auth, const char *bearer,
                                      router_principal *who);

#endif
