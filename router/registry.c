/* registry.c — see registry.h. */
#include "router/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int router_registry_add(router_db *db, json_t *record, const char *tmpl, char *err, size_t es) {
    int64_t now = (int64_t)time(NULL);
    json_object_set_new(record, "created_at", json_integer((json_int_t)now));
    const char *id = json_string_value(json_object_get(record, "id"));
    char *text = json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);
    if (!id || !text) {
        free(text);
        snprintf(err, es, "cannot serialize the record");
        return ROUTER_DB_ENOMEM;
    }
    int rc = router_db_model_insert(db, id, text, tmpl, now, err, es);
    free(text);
    return rc;
}

int router_registry_get(router_db *db, const char *id, json_t **out, char **tmpl_out, char *err, size_t es) {
    char *text = NULL;
    *out = NULL;
    int rc = router_db_model_get(db, id, &text, tmpl_out, err, es);
    if (rc) return rc;
    json_error_t je;
    *out = json_loads(text, 0, &je);
    free(text);
    if (!*out) {
        snprintf(err, es, "stored record of '%s' is not valid JSON: %s", id, je.text);
        if (tmpl_out) { free(*tmpl_out); *tmpl_out = NULL; }
        return ROUTER_DB_EIO;
    }
    return ROUTER_DB_OK;
}

static void add_record(void *user, const char *id, const char *text) {
    (void)id;
    json_t *r = json_loads(text, 0, NULL);
    if (r) json_array_append_new(user, r);
}

json_t *router_registry_list(router_db *db, char *err, size_t es) {
    json_t *a = json_array();
    if (router_db_model_each(db, add_record, a, err, es)) { json_decref(a); return NULL; }
    return a;
}

static void add_id(void *user, const char *id, const char *text) {
    (void)text;
    json_array_append_new(user, json_string(id));
}

json_t *router_registry_ids(router_db *db, char *err, size_t es) {
    json_t *a = json_array();
    if (router_db_model_each(db, add_id, a, err, es)) { json_decref(a); return NULL; }
    return a;
}

int router_registry_delete(router_db *db, const char *id, char *err, size_t es) {
    return router_db_model_delete(db, id, err, es);
}
