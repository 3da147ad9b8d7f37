/* router_client.c — see router_client.h. */
#include "node/router_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

struct llmr_router_client {
    pthread_mutex_t mu;
    char *url, *state_path;
    llmr_httpc *http;
    llmr_register_body_fn body_fn;
    void *body_user;
    char node_id[128];
    char token[256];
    int valid;
    unsigned long registrations;
    llmr_router_settings settings;
    char *trace_dir;
    unsigned long trace_seq;
    char *join_key; /* --join-key: the bearer of POST /v0/nodes, or NULL */
};

void llmr_router_client_set_join_key(llmr_router_client *rc, const char *key) {
    free(rc->join_key);
    rc->join_key = key && *key ? strdup(key) : NULL;
}

void llmr_router_client_set_trace_dir(llmr_router_client *rc, const char *dir) {
    free(rc->trace_dir);
    rc->trace_dir = dir && *dir ? strdup(dir) : NULL;
    if (rc->trace_dir) mkdir(rc->trace_dir, 0755);
}

void llmr_router_client_trace(llmr_router_client *rc, const char *kind, const char *text, size_t len) {
    if (!rc->trace_dir || !text) return;
    pthread_mutex_lock(&rc->mu);
    unsigned long seq = ++rc->trace_seq;
    pthread_mutex_unlock(&rc->mu);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s-%06lu-%ld.json", rc->trace_dir, kind, seq, (long)getpid()); /* restarts never overwrite */
    FILE *f = fopen(path, "w");
    if (!f) { log_warn("trace %s: %s", path, strerror(errno)); return; }
    fwrite(text, 1, len, f);
    fclose(f);
}

static void load_state(llmr_router_client *rc) {
    json_error_t je;
    json_t *st = json_load_file(rc->state_path, 0, &je);
    if (!st) {
        if (access(rc->state_path, F_OK) == 0) log_warn("%s: ignored (%s, line %d)", rc->state_path, je.text, je.line);
        return;
    }
    const char *id = json_string_value(json_object_get(st, "node_id"));
    const char *tok = json_string_value(json_object_get(st, "node_token"));
    const char *url = json_string_value(json_object_get(st, "router"));
    if (id && url && strcmp(url, rc->url) == 0) {
        snprintf(rc->node_id, sizeof rc->node_id, "%s", id);
        /* The token is kept only to answer the router's pushes before we re-register; a fresh
         * registration always replaces it. */
        if (tok) snprintf(rc->token, sizeof rc->token, "%s", tok);
        log_info("node id %s from %s", rc->node_id, rc->state_path);
    } else if (id) {
        log_info("%s belongs to router %s, not %s: registering as a new node", rc->state_path, url ? url : "?", rc->url);
    }
    json_decref(st);
}

static int save_state(llmr_router_client *rc) {
    json_t *st = json_pack("{s:s, s:s, s:s}", "node_id", rc->node_id, "node_token", rc->token, "router", rc->url);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", rc->state_path);
    int rc_ = -1;
    char *text = st ? json_dumps(st, JSON_INDENT(2)) : NULL;
    int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    if (fd >= 0) {
        size_t len = strlen(text);
        if (write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0) rc_ = 0;
        close(fd);
        if (rc_ == 0 && rename(tmp, rc->state_path) != 0) rc_ = -1;
    }
    if (rc_ != 0) log_error("cannot persist the node id in %s: %s", rc->state_path, strerror(errno));
    free(text);
    json_decref(st);
    return rc_;
}

llmr_router_client *llmr_router_client_create(const char *router_url, const char *state_dir,
                                              llmr_register_body_fn body_fn, void *body_user, char *err,
                                              size_t es) {
    if (!router_url || strncmp(router_url, "http", 4) != 0) {
        snprintf(err, es, "--router: expected an http(s) URL, got '%s'", router_url ? router_url : "(none)");
        return NULL;
    }
    if (!state_dir || !*state_dir) { snprintf(err, es, "--state-dir is required"); return NULL; }
    if (mkdir(state_dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, es, "--state-dir %s: %s", state_dir, strerror(errno));
        return NULL;
    }
    llmr_router_client *rc = calloc(1, sizeof *rc);
    llmr_httpc_opts o = {.connect_timeout_ms = 5000, .timeout_ms = 15000, .retries = 1, .backoff_ms = 200,
                         .backoff_max_ms = 1000, .user_agent = "llmr-node/0.1"};
    if (!rc || !(rc->url = strdup(router_url)) || !(rc->http = llmr_httpc_create(&o)) ||
        asprintf(&rc->state_path, "%s/node.json", state_dir) < 0) {
        if (rc) { rc->state_path = NULL; llmr_router_client_destroy(rc); }
        snprintf(err, es, "out of memory");
        return NULL;
    }
    size_t l = strlen(rc->url);
    while (l > 0 && rc->url[l - 1] == '/') rc->url[--l] = '\0';
    pthread_mutex_init(&rc->mu, NULL);
    rc->body_fn = body_fn;
    rc->body_user = body_user;
    rc->settings.heartbeat_interval_s = 5;
    load_state(rc);
    return rc;
}

void llmr_router_client_destroy(llmr_router_client *rc) {
    if (!rc) return;
    llmr_httpc_destroy(rc->http);
    if (rc->url) pthread_mutex_destroy(&rc->mu);
    free(rc->url);
    free(rc->state_path);
    free(rc->trace_dir);
    free(rc->join_key);
    free(rc);
}

void llmr_router_error_message(const llmr_httpc_resp *resp, char *buf, size_t size) {
    json_t *j = resp->body ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    if (m) snprintf(buf, size, "%s", m);
    else snprintf(buf, size, "%.300s", resp->body ? resp->body : "(no body)");
    json_decref(j);
}

/* One registration attempt. 0 on 201 with a valid answer. */
static int register_once(llmr_router_client *rc, char *err, size_t es) {
    json_t *body = rc->body_fn ? rc->body_fn(rc->body_user) : json_object();
    if (!body) { snprintf(err, es, "out of memory"); return -1; }
    pthread_mutex_lock(&rc->mu);
    if (rc->node_id[0]) json_object_set_new(body, "node_id", json_string(rc->node_id));
    pthread_mutex_unlock(&rc->mu);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char url[4200], why[1024];
    snprintf(url, sizeof url, "%s/v0/nodes", rc->url);
    llmr_httpc_resp resp = {0};
    if (text) llmr_router_client_trace(rc, "register-request", text, strlen(text));
    /* The join key, when set, is the registration's bearer (the router may require it). */
    char auth[600];
    snprintf(auth, sizeof auth, "Authorization: Bearer %.560s", rc->join_key ? rc->join_key : "");
    const char *headers[] = {auth, NULL};
    llmr_httpc_req q = {.method = "POST", .url = url, .body = text, .headers = rc->join_key ? headers : NULL};
    llmr_httpc_status st = text ? llmr_httpc_do(rc->http, &q, &resp, why, sizeof why) : LLMR_HTTPC_ENOMEM;
    free(text);
    int ok = -1;
    if (st != LLMR_HTTPC_OK) {
        snprintf(err, es, "%s", st == LLMR_HTTPC_ENOMEM ? "out of memory" : why);
    } else if (resp.status != 201 && resp.status != 200) {
        llmr_router_error_message(&resp, why, sizeof why);
        snprintf(err, es, "POST %.300s: HTTP %ld: %.1000s", url, resp.status, why);
    } else {
        llmr_router_client_trace(rc, "register-response", resp.body, resp.body_len);
        json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
        const char *id = json_string_value(json_object_get(j, "node_id"));
        const char *tok = json_string_value(json_object_get(j, "node_token"));
        json_t *s = json_object_get(j, "settings");
        if (!id || !*id || !tok || strlen(tok) < 16 || !json_is_object(s)) {
            snprintf(err, es, "POST %.300s: answer lacks node_id, node_token or settings", url);
        } else {
            pthread_mutex_lock(&rc->mu);
            snprintf(rc->node_id, sizeof rc->node_id, "%s", id);
            snprintf(rc->token, sizeof rc->token, "%s", tok);
            rc->settings.allow_cpu_engines = json_is_true(json_object_get(s, "allow_cpu_engines"));
            json_int_t hb = json_integer_value(json_object_get(s, "heartbeat_interval_s"));
            json_int_t sy = json_integer_value(json_object_get(s, "sync_interval_s"));
            rc->settings.heartbeat_interval_s = hb > 0 && hb < 3600 ? (int)hb : 5;
            rc->settings.sync_interval_s = sy > 0 && sy < 86400 ? (int)sy : 0;
            rc->valid = 1;
            rc->registrations++;
            save_state(rc);
            pthread_mutex_unlock(&rc->mu);
            ok = 0;
        }
        json_decref(j);
    }
    llmr_httpc_resp_free(&resp);
    return ok;
}

/* Sleeps ms in small steps so a stop request is honoured quickly. Returns -1 if stopped. */
static int nap(long ms, const atomic_int *stop) {
    for (long left = ms; left > 0; left -= 50) {
        if (stop && atomic_load(stop)) return -1;
        struct timespec ts = {0, (left < 50 ? left : 50) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return stop && atomic_load(stop) ? -1 : 0;
}

int llmr_router_client_register(llmr_router_client *rc, const atomic_int *stop) {
    long backoff = 500;
    char err[1536], last[1536] = "";
    for (int attempt = 1;; attempt++) {
        if (stop && atomic_load(stop)) return -1;
        if (register_once(rc, err, sizeof err) == 0) {
            llmr_router_settings s;
            llmr_router_client_settings(rc, &s);
            log_info("registered with %s as node %s (allow_cpu_engines=%s, heartbeat every %d s)", rc->url,
                     rc->node_id, s.allow_cpu_engines ? "true" : "false", s.heartbeat_interval_s);
            return 0;
        }
        /* Log the first failure and every change of cause at WARN, repeats at DEBUG. */
        if (strcmp(err, last) != 0) log_warn("registration failed (attempt %d, next in %.1f s): %s", attempt, backoff / 1000.0, err);
        else log_debug("registration failed again (attempt %d): %s", attempt, err);
        snprintf(last, sizeof last, "%s", err);
        if (nap(backoff, stop) != 0) return -1;
        backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
    }
}

int llmr_router_client_registered(llmr_router_client *rc) {
    pthread_mutex_lock(&rc->mu);
    int v = rc->valid;
    pthread_mutex_unlock(&rc->mu);
    return v;
}

void llmr_router_client_invalidate(llmr_router_client *rc) {
    pthread_mutex_lock(&rc->mu);
    if (rc->valid) log_warn("the router no longer accepts this node's token: registering again");
    rc->valid = 0;
    pthread_mutex_unlock(&rc->mu);
}

void llmr_router_client_node_id(llmr_router_client *rc, char *buf, size_t size) {
    pthread_mutex_lock(&rc->mu);
    snprintf(buf, size, "%s", rc->node_id);
    pthread_mutex_unlock(&rc->mu);
}

void llmr_router_client_settings(llmr_router_client *rc, llmr_router_settings *out) {
    pthread_mutex_lock(&rc->mu);
    *out = rc->settings;
    pthread_mutex_unlock(&rc->mu);
}

unsigned long llmr_router_client_registrations(llmr_router_client *rc) {
    pthread_mutex_lock(&rc->mu);
    unsigned long n = rc->registrations;
    pthread_mutex_unlock(&rc->mu);
    return n;
}

int llmr_router_client_check_token(llmr_router_client *rc, const char *bearer) {
    if (!bearer) return 0;
    pthread_mutex_lock(&rc->mu);
    size_t a = strlen(rc->token), b = strlen(bearer);
    unsigned char diff = (unsigned char)(a != b || a == 0);
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned char)(rc->token[i] ^ bearer[i]);
    pthread_mutex_unlock(&rc->mu);
    return diff == 0;
}

llmr_httpc_status llmr_router_client_call(llmr_router_client *rc, const char *method, const char *path,
                                          const char *body, long timeout_ms, llmr_httpc_resp *resp, char *err,
                                          size_t es) {
    char url[4200], auth[300];
    snprintf(url, sizeof url, "%s%s", rc->url, path);
    pthread_mutex_lock(&rc->mu);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", rc->token);
    pthread_mutex_unlock(&rc->mu);
    const char *headers[] = {auth, NULL};
    llmr_httpc_req q = {.method = method, .url = url, .body = body, .headers = headers, .timeout_ms = timeout_ms};
    llmr_httpc_status st = llmr_httpc_do(rc->http, &q, resp, err, es);
    if (st == LLMR_HTTPC_OK && resp->status == 401) llmr_router_client_invalidate(rc);
    return st;
}

llmr_httpc *llmr_router_client_http(llmr_router_client *rc) { return rc->http; }
const char *llmr_router_client_url(const llmr_router_client *rc) { return rc->url; }
