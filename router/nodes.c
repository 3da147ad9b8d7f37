/* nodes.c — see nodes.h. */
#include "router/nodes.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "router/auth.h"

typedef struct node {
    char id[64];
    char machine_name[256];
    char address[256];
    int port;
    json_t *info;            /* the registration body */
    json_t *heartbeat;       /* the last heartbeat body, or NULL */
    int64_t registered_at;   /* unix seconds */
    int64_t last_seen_ms;    /* monotonic; 0 = not since the router started */
    int64_t last_heartbeat_at; /* unix seconds; 0 = never */
    int online;
    char token[128];         /* plaintext, learnt at registration or from a heartbeat; "" = unknown */
    int outstanding;         /* requests this router has in flight on the node */
} node;

struct router_nodes {
    pthread_mutex_t mu;
    router_db *db;
    int timeout_ms;
    node **v;
    size_t n;
    size_t rr;               /* round-robin cursor of router_nodes_acquire_ex */
};

const char *router_nodes_strerror(int st) {
    switch (st) {
    case ROUTER_NODES_OK: return "ok";
    case ROUTER_NODES_EINVAL: return "invalid message";
    case ROUTER_NODES_ENOGPU: return "node has no GPU";
    case ROUTER_NODES_ENOTFOUND: return "unknown node";
    case ROUTER_NODES_EFORBIDDEN: return "token of another node";
    case ROUTER_NODES_EDB: return "database error";
    case ROUTER_NODES_ENOMEM: return "out of memory";
    case ROUTER_NODES_EBUSY: return "every node serving the model is at its concurrency limit";
    case ROUTER_NODES_EOFFLINE: return "no node is online";
    }
    return "unknown nodes status";
}

int64_t router_nodes_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void node_free(node *x) {
    if (!x) return;
    json_decref(x->info);
    json_decref(x->heartbeat);
    free(x);
}

static node *find(router_nodes *n, const char *id) {
    for (size_t i = 0; i < n->n; i++)
        if (!strcmp(n->v[i]->id, id)) return n->v[i];
    return NULL;
}

static void fill_from_info(node *x) {
    snprintf(x->machine_name, sizeof x->machine_name, "%s", json_string_value(json_object_get(x->info, "machine_name")) ?: "");
    snprintf(x->address, sizeof x->address, "%s", json_string_value(json_object_get(x->info, "address")) ?: "");
    x->port = (int)json_integer_value(json_object_get(x->info, "port"));
}

static int append(router_nodes *n, node *x) {
    node **v = realloc(n->v, (n->n + 1) * sizeof *v);
    if (!v) return -1;
    n->v = v;
    n->v[n->n++] = x;
    return 0;
}

static void load_one(void *user, const char *id, const char *info, int64_t registered_at) {
    router_nodes *n = user;
    node *x = calloc(1, sizeof *x);
    if (!x) return;
    snprintf(x->id, sizeof x->id, "%s", id);
    x->info = json_loads(info, 0, NULL);
    x->registered_at = registered_at;
    if (!x->info || append(n, x)) { node_free(x); return; }
    fill_from_info(x);
}

router_nodes *router_nodes_create(router_db *db, int timeout_s, char *err, size_t es) {
    router_nodes *n = calloc(1, sizeof *n);
    if (!n) { snprintf(err, es, "out of memory"); return NULL; }
    pthread_mutex_init(&n->mu, NULL);
    n->db = db;
    n->timeout_ms = (timeout_s > 0 ? timeout_s : 15) * 1000;
    if (router_db_node_each(db, load_one, n, err, es)) { router_nodes_destroy(n); return NULL; }
    return n;
}

void router_nodes_destroy(router_nodes *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) node_free(n->v[i]);
    free(n->v);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

/* --- message checks (the schemas in schema/, field by field) ---------------------------- */

#define BAD(field, ...) (snprintf(param, 32, "%s", field), snprintf(err, es, __VA_ARGS__), ROUTER_NODES_EINVAL)

static int str_field(json_t *o, const char *k, size_t min, size_t max, int required, char *param, char *err, size_t es) {
    json_t *v = json_object_get(o, k);
    if (!v) return required ? BAD(k, "'%s' is required", k) : 0;
    if (!json_is_string(v)) return BAD(k, "'%s' must be a string", k);
    size_t l = json_string_length(v);
    if (l < min || l > max) return BAD(k, "'%s' must be %zu to %zu characters", k, min, max);
    return 0;
}

static int int_field(json_t *o, const char *k, json_int_t min, json_int_t max, int required, char *param, char *err,
                     size_t es) {
    json_t *v = json_object_get(o, k);
    if (!v) return required ? BAD(k, "'%s' is required", k) : 0;
    if (!json_is_integer(v)) return BAD(k, "'%s' must be an integer", k);
    if (json_integer_value(v) < min || json_integer_value(v) > max)
        return BAD(k, "'%s' must be between %lld and %lld", k, (long long)min, (long long)max);
    return 0;
}

static int str_array(json_t *o, const char *k, int required, const char *where, char *param, char *err, size_t es) {
    json_t *v = json_object_get(o, k);
    if (!v) return required ? BAD(k, "%s.%s is required", where, k) : 0;
    if (!json_is_array(v)) return BAD(k, "%s.%s must be an array of strings", where, k);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (!json_is_string(e)) return BAD(k, "%s.%s[%zu] must be a string", where, k, i);
    return 0;
}

/* A host name or IP literal the router can put in a URL. */
static int address_ok(const char *a) {
    if (!*a || strlen(a) > 253) return 0;
    for (; *a; a++)
        if (!isalnum((unsigned char)*a) && !strchr(".-:[]_", *a)) return 0;
    return 1;
}

static int check_register(json_t *b, int allow_cpu, char *param, char *err, size_t es) {
    int rc;
    if (!json_is_object(b)) return BAD("", "the body must be a JSON object");
    if ((rc = str_field(b, "machine_name", 1, 255, 1, param, err, es)) || (rc = str_field(b, "address", 1, 253, 1, param, err, es)) ||
        (rc = int_field(b, "port", 1, 65535, 1, param, err, es)) || (rc = str_field(b, "node_id", 1, 63, 0, param, err, es)) ||
        (rc = str_field(b, "version", 0, 128, 0, param, err, es)) ||
        (rc = int_field(b, "max_concurrency", 1, 1 << 20, 0, param, err, es)))
        return rc;
    if (!address_ok(json_string_value(json_object_get(b, "address"))))
        return BAD("address", "'address' must be a host name or IP address (letters, digits, '.', '-', ':', '[', ']')");
    json_t *gpus = json_object_get(b, "gpus"), *engines = json_object_get(b, "engines");
    if (!json_is_array(gpus)) return BAD("gpus", "'gpus' must be an array (empty for a node without GPU)");
    if (!json_is_array(engines)) return BAD("engines", "'engines' must be an array");
    size_t i;
    json_t *e;
    json_array_foreach(gpus, i, e) {
        char w[32];
        snprintf(w, sizeof w, "gpus[%zu]", i);
        if (!json_is_object(e)) return BAD("gpus", "%s must be an object", w);
        if ((rc = int_field(e, "index", 0, 1 << 20, 1, param, err, es)) || (rc = str_field(e, "name", 0, 256, 1, param, err, es)) ||
            (rc = int_field(e, "memory_total_bytes", 0, INT64_MAX, 1, param, err, es)) ||
            (rc = int_field(e, "memory_free_bytes", 0, INT64_MAX, 0, param, err, es))) {
            size_t l = strlen(err);
            snprintf(err + l, es - l, " (in %s)", w);
            snprintf(param, 32, "gpus");
            return rc;
        }
    }
    json_array_foreach(engines, i, e) {
        char w[32];
        snprintf(w, sizeof w, "engines[%zu]", i);
        if (!json_is_object(e)) return BAD("engines", "%s must be an object", w);
        if ((rc = str_field(e, "id", 1, 128, 1, param, err, es)) || (rc = str_field(e, "version", 0, 128, 1, param, err, es)) ||
            (rc = str_array(e, "runtimes", 1, w, param, err, es)) || (rc = str_array(e, "formats", 1, w, param, err, es)) ||
            (rc = str_array(e, "architectures", 0, w, param, err, es)) || (rc = str_array(e, "gpu_backends", 0, w, param, err, es))) {
            snprintf(param, 32, "engines");
            return rc;
        }
    }
    if (json_array_size(gpus) == 0 && !allow_cpu) {
        snprintf(param, 32, "gpus");
        snprintf(err, es, "node '%s' reports no GPU: llmr serves models on GPUs only (NFR-001); a router started with "
                          "--allow-cpu-nodes accepts CPU nodes, for tests and demos only",
                 json_string_value(json_object_get(b, "machine_name")));
        return ROUTER_NODES_ENOGPU;
    }
    return 0;
}

int router_nodes_register(router_nodes *n, json_t *b, int allow_cpu, char *id_out, size_t id_size, char *token_out,
                          size_t token_size, char *param_out, char *err, size_t es) {
    char param[32] = "";
    int rc = check_register(b, allow_cpu, param, err, es);
    if (param_out) snprintf(param_out, 32, "%s", param);
    if (rc) return rc;
    char token[128], hash[65], id[64];
    if (router_auth_random_token(ROUTER_NODE_TOKEN_PREFIX, 32, token, sizeof token)) {
        snprintf(err, es, "cannot draw random bytes");
        return ROUTER_NODES_ENOMEM;
    }
    router_auth_hash(token, hash);
    json_t *info = json_deep_copy(b);
    json_object_del(info, "node_id");
    char *text = json_dumps(info, JSON_COMPACT);
    if (!info || !text) { json_decref(info); free(text); snprintf(err, es, "out of memory"); return ROUTER_NODES_ENOMEM; }
    pthread_mutex_lock(&n->mu);
    const char *want = json_string_value(json_object_get(b, "node_id"));
    node *x = want ? find(n, want) : NULL;
    if (x) snprintf(id, sizeof id, "%s", x->id);
    else if (router_auth_random_token("node-", 8, id, sizeof id)) rc = ROUTER_NODES_ENOMEM, snprintf(err, es, "cannot draw random bytes");
    int64_t now = (int64_t)time(NULL);
    if (!rc && router_db_node_put(n->db, id, hash, text, x ? x->registered_at : now, err, es)) rc = ROUTER_NODES_EDB;
    if (!rc && !x) {
        if (!(x = calloc(1, sizeof *x)) || append(n, x)) {
            free(x);
            x = NULL;
            rc = ROUTER_NODES_ENOMEM;
            snprintf(err, es, "out of memory");
        } else {
            snprintf(x->id, sizeof x->id, "%s", id);
            x->registered_at = now;
        }
    }
    if (!rc) {
        json_decref(x->info);
        x->info = info;
        info = NULL;
        fill_from_info(x);
        snprintf(x->token, sizeof x->token, "%s", token);
        x->online = 1;
        x->last_seen_ms = router_nodes_now_ms();
        x->last_heartbeat_at = now;
        snprintf(id_out, id_size, "%s", id);
        snprintf(token_out, token_size, "%s", token);
        log_info("node %s registered: %s at %s:%d, %zu GPU(s)", id, x->machine_name, x->address, x->port,
                 json_array_size(json_object_get(x->info, "gpus")));
    }
    pthread_mutex_unlock(&n->mu);
    json_decref(info);
    free(text);
    return rc;
}

static const char *const STATES[] = {"pending", "downloading", "verifying", "loading", "ready", "unsupported", "failed"};

static int check_heartbeat(json_t *b, char *param, char *err, size_t es) {
    int rc;
    if (!json_is_object(b)) return BAD("", "the body must be a JSON object");
    if ((rc = str_field(b, "node_id", 1, 63, 1, param, err, es)) ||
        (rc = int_field(b, "active_requests", 0, 1 << 30, 1, param, err, es)))
        return rc;
    json_t *gpus = json_object_get(b, "gpus"), *models = json_object_get(b, "models");
    if (!json_is_array(gpus)) return BAD("gpus", "'gpus' must be an array");
    if (!json_is_array(models)) return BAD("models", "'models' must be an array");
    size_t i;
    json_t *e;
    json_array_foreach(gpus, i, e) if (!json_is_object(e) || !json_is_integer(json_object_get(e, "index")))
        return BAD("gpus", "gpus[%zu] must be an object with an integer 'index'", i);
    json_array_foreach(models, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));
        const char *st = json_string_value(json_object_get(e, "state"));
        if (!json_is_object(e) || !id || !st) return BAD("models", "models[%zu] must be an object with string 'id' and 'state'", i);
        int known = 0;
        for (size_t k = 0; k < sizeof STATES / sizeof *STATES; k++) known |= !strcmp(st, STATES[k]);
        if (!known) return BAD("models", "models[%zu].state '%.64s' is not one of pending, downloading, verifying, loading, ready, unsupported, failed", i, st);
    }
    return 0;
}

int router_nodes_heartbeat(router_nodes *n, const char *node_id, const char *token, json_t *b, char *param_out,
                           char *err, size_t es) {
    char param[32] = "";
    int rc = check_heartbeat(b, param, err, es);
    if (param_out) snprintf(param_out, 32, "%s", param);
    if (rc) return rc;
    const char *claimed = json_string_value(json_object_get(b, "node_id"));
    if (strcmp(claimed, node_id)) {
        snprintf(err, es, "node_id '%.63s' does not match the node the token belongs to", claimed);
        if (param_out) snprintf(param_out, 32, "node_id");
        return ROUTER_NODES_EFORBIDDEN;
    }
    pthread_mutex_lock(&n->mu);
    node *x = find(n, node_id);
    if (!x) {
        rc = ROUTER_NODES_ENOTFOUND;
        snprintf(err, es, "node '%s' is not registered", node_id);
    } else {
        json_decref(x->heartbeat);
        x->heartbeat = json_incref(b);
        if (token) snprintf(x->token, sizeof x->token, "%s", token);
        x->last_seen_ms = router_nodes_now_ms();
        x->last_heartbeat_at = (int64_t)time(NULL);
        if (!x->online) log_info("node %s (%s) is online again", x->id, x->machine_name);
        x->online = 1;
    }
    pthread_mutex_unlock(&n->mu);
    return rc;
}

void router_nodes_check(router_nodes *n, int64_t now_ms) {
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n; i++) {
        node *x = n->v[i];
        if (x->online && now_ms - x->last_seen_ms > n->timeout_ms) {
            x->online = 0;
            log_warn("node %s (%s) is offline: no heartbeat for %lld ms", x->id, x->machine_name,
                     (long long)(now_ms - x->last_seen_ms));
        }
    }
    pthread_mutex_unlock(&n->mu);
}

void router_nodes_set_last_seen(router_nodes *n, const char *id, int64_t t) {
    pthread_mutex_lock(&n->mu);
    node *x = find(n, id);
    if (x) x->last_seen_ms = t;
    pthread_mutex_unlock(&n->mu);
}

int router_nodes_online(router_nodes *n, const char *id) {
    pthread_mutex_lock(&n->mu);
    node *x = find(n, id);
    int on = x && x->online;
    pthread_mutex_unlock(&n->mu);
    return on;
}

/* --- views ------------------------------------------------------------------------------------ */

static json_t *node_json(const node *x, int64_t now_ms) {
    json_t *hb = x->heartbeat;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:s, s:I, s:O, s:O, s:i}", "object", "node", "id", x->id,
                          "machine_name", x->machine_name, "address", x->address, "port", x->port, "online", x->online,
                          "status", x->online ? "online" : "offline", "registered_at", (json_int_t)x->registered_at,
                          "gpus", json_object_get(x->info, "gpus"), "engines", json_object_get(x->info, "engines"),
                          "outstanding_requests", x->outstanding);
    if (!o) return NULL;
    const char *copy[] = {"version", "max_concurrency"};
    for (int i = 0; i < 2; i++)
        if (json_object_get(x->info, copy[i])) json_object_set(o, copy[i], json_object_get(x->info, copy[i]));
    json_object_set_new(o, "last_heartbeat_at", x->last_heartbeat_at ? json_integer(x->last_heartbeat_at) : json_null());
    json_object_set_new(o, "seconds_since_heartbeat",
                        x->last_seen_ms ? json_real((double)(now_ms - x->last_seen_ms) / 1000.0) : json_null());
    json_object_set_new(o, "active_requests", json_integer(json_integer_value(json_object_get(hb, "active_requests"))));
    const char *live[] = {"ram_total_bytes", "ram_free_bytes", "alerts"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(hb, live[i])) json_object_set(o, live[i], json_object_get(hb, live[i]));
    json_t *gs = json_object_get(hb, "gpus"), *ms = json_object_get(hb, "models");
    json_object_set_new(o, "gpu_status", gs ? json_incref(gs) : json_array());
    json_object_set_new(o, "models", ms ? json_incref(ms) : json_array());
    return o;
}

json_t *router_nodes_list_json(router_nodes *n) {
    json_t *data = json_array();
    int64_t now = router_nodes_now_ms();
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n; i++) json_array_append_new(data, node_json(n->v[i], now));
    pthread_mutex_unlock(&n->mu);
    return json_pack("{s:s, s:o}", "object", "list", "data", data);
}

static json_t *model_entry(const node *x, const char *model_id) {
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(x->heartbeat, "models"), i, m) {
        const char *id = json_string_value(json_object_get(m, "id"));
        if (id && !strcasecmp(id, model_id)) return m;
    }
    return NULL;
}

json_t *router_nodes_model_states(router_nodes *n, const char *model_id) {
    json_t *out = json_array();
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n; i++) {
        node *x = n->v[i];
        json_t *m = model_entry(x, model_id);
        json_t *e = json_pack("{s:s, s:s, s:b, s:s}", "node_id", x->id, "machine_name", x->machine_name, "online",
                              x->online, "state", m ? json_string_value(json_object_get(m, "state")) : "unknown");
        const char *extra[] = {"reason", "engine", "loaded", "progress"};
        for (int k = 0; m && k < 4; k++)
            if (json_object_get(m, extra[k])) json_object_set(e, extra[k], json_object_get(m, extra[k]));
        json_array_append_new(out, e);
    }
    pthread_mutex_unlock(&n->mu);
    return out;
}

static int ready_on(const node *x, const char *model_id) {
    json_t *m = model_entry(x, model_id);
    return x->online && m && !strcmp(json_string_value(json_object_get(m, "state")), "ready");
}

int router_nodes_model_ready(router_nodes *n, const char *model_id) {
    int ready = 0;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n && !ready; i++) ready = ready_on(n->v[i], model_id);
    pthread_mutex_unlock(&n->mu);
    return ready;
}

static void target_of(const node *x, router_node_target *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->id, sizeof t->id, "%s", x->id);
    int v6 = strchr(x->address, ':') && x->address[0] != '[';
    snprintf(t->base_url, sizeof t->base_url, "http://%s%s%s:%d", v6 ? "[" : "", x->address, v6 ? "]" : "", x->port);
    snprintf(t->token, sizeof t->token, "%s", x->token);
}

size_t router_nodes_targets(router_nodes *n, router_node_target **out) {
    *out = NULL;
    size_t k = 0;
    pthread_mutex_lock(&n->mu);
    if (n->n && (*out = calloc(n->n, sizeof **out)))
        for (size_t i = 0; i < n->n; i++)
            if (n->v[i]->online && n->v[i]->token[0]) target_of(n->v[i], &(*out)[k++]);
    pthread_mutex_unlock(&n->mu);
    return k;
}

int router_nodes_acquire(router_nodes *n, const char *model_id, router_node_target *out) {
    node *best = NULL;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n; i++) {
        node *x = n->v[i];
        if (!ready_on(x, model_id)) continue;
        json_int_t act = json_integer_value(json_object_get(x->heartbeat, "active_requests"));
        json_int_t bact = best ? json_integer_value(json_object_get(best->heartbeat, "active_requests")) : 0;
        if (!best || x->outstanding < best->outstanding || (x->outstanding == best->outstanding && act < bact)) best = x;
    }
    if (best) {
        best->outstanding++;
        target_of(best, out);
    }
    pthread_mutex_unlock(&n->mu);
    return best ? ROUTER_NODES_OK : ROUTER_NODES_ENOTFOUND;
}

void router_nodes_release(router_nodes *n, const char *node_id) {
    pthread_mutex_lock(&n->mu);
    node *x = find(n, node_id);
    if (x && x->outstanding > 0) x->outstanding--;
    pthread_mutex_unlock(&n->mu);
}

static int max_concurrency(const node *x) {
    json_int_t m = json_integer_value(json_object_get(x->info, "max_concurrency"));
    return m > 0 ? (int)m : 4;
}

int router_nodes_acquire_ex(router_nodes *n, const char *model_id, const char *exclude, router_node_target *out) {
    node *best = NULL;
    size_t best_i = 0;
    int online = 0, ready = 0;
    pthread_mutex_lock(&n->mu);
    /* Scanning from just after the last pick makes equal candidates take turns. */
    for (size_t k = 0; k < n->n; k++) {
        size_t i = (n->rr + 1 + k) % n->n;
        node *x = n->v[i];
        online += x->online;
        if (!ready_on(x, model_id) || (exclude && !strcmp(exclude, x->id))) continue;
        ready++;
        if (x->outstanding >= max_concurrency(x)) continue;
        if (!best || x->outstanding < best->outstanding) { best = x; best_i = i; }
    }
    if (best) {
        best->outstanding++;
        n->rr = best_i;
        target_of(best, out);
    }
    pthread_mutex_unlock(&n->mu);
    if (best) return ROUTER_NODES_OK;
    return ready ? ROUTER_NODES_EBUSY : online ? ROUTER_NODES_ENOTFOUND : ROUTER_NODES_EOFFLINE;
}

int router_nodes_online_count(router_nodes *n) {
    int c = 0;
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < n->n; i++) c += n->v[i]->online;
    pthread_mutex_unlock(&n->mu);
    return c;
}

void router_nodes_mark_unreachable(router_nodes *n, const char *node_id, const char *cause) {
    pthread_mutex_lock(&n->mu);
    node *x = find(n, node_id);
    if (x && x->online) {
        x->online = 0;
        log_warn("node %s (%s) is offline: unreachable (%s); its next heartbeat brings it back", x->id, x->machine_name,
                 cause);
    }
    pthread_mutex_unlock(&n->mu);
}
