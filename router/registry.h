/* registry.h — registered models: records stored in the database (db.h) as JSON.
 *
 * A record is what POST /v0/models/register answered with 201 (see validate.h and docs/router.md);
 * it is written once, by one INSERT, and only deleted afterwards. */
#ifndef ROUTER_REGISTRY_H
#define ROUTER_REGISTRY_H

#include <jansson.h>
#include <stdint.h>

#include "router/db.h"

/* Stores a validated record (sets its created_at to now). EEXIST if the id is taken: the existing
 * record stays untouched. tmpl (may be NULL) is the chat template text. */
int router_registry_add(router_db *db, json_t *record, const char *tmpl, char *err, size_t err_size);
/* *out receives a new ref to the record; ENOTFOUND if absent. tmpl_out (may be NULL) receives the
 * template text (malloc'd) or NULL. */
int router_registry_get(router_db *db, const char *id, json_t **out, char **tmpl_out, char *err, size_t err_size);
/* Every record, in id order (new ref), or NULL with err. */
json_t *router_registry_list(router_db *db, char *err, size_t err_size);
/* Every registered id (new ref array), or NULL with err. */
json_t *router_registry_ids(router_db *db, char *err, size_t err_size);
int router_registry_delete(router_db *db, const char *id, char *err, size_t err_size);

#endif
