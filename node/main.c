/* llmr-node — the node agent: joins the router, fetches and verifies registered models, runs them.
 * See node/node.h for the parts and docs/node.md for the flags, states and files on disk. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "node/api.h"
#include "node/downloader.h"
#include "node/generate.h"
#include "node/heartbeat.h"
#include "node/node.h"
#include "node/sync.h"

static const char *DESCRIPTION =
    "llmr-node: a GPU node of llmr. Registers with the router (GPU inventory via NVML, loaded at run\n"
    "time), fetches every registered model (resumable, sha256-verified downloads), validates it and\n"
    "loads it through its engine plugins; reports per-model state, progress and GPU memory in\n"
    "heartbeats. Serves POST /v0/sync (router push), POST /v0/generate (inference, SSE), GET /metrics\n"
    "and GET /v0/status.";

static void on_term(void *arg) {
    llmr_node *n = arg;
    log_info("shutting down");
    atomic_store(&n->stop, 1);
    llmr_http_server_shutdown(n->http, 2000);
}

/* The host part of --listen, for the advertised address when none is given. */
static void default_address(llmr_node *n) {
    if (n->cfg.advertise_address && *n->cfg.advertise_address) {
        snprintf(n->address, sizeof n->address, "%s", n->cfg.advertise_address);
        return;
    }
    char host[256];
    const char *l = n->cfg.listen;
    const char *colon = strrchr(l, ':');
    size_t hl = colon ? (size_t)(colon - l) : strlen(l);
    if (hl >= sizeof host) hl = sizeof host - 1;
    memcpy(host, l, hl);
    host[hl] = '\0';
    if (host[0] == '[') { memmove(host, host + 1, strlen(host)); host[strcspn(host, "]")] = '\0'; }
    if (!*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
        snprintf(n->address, sizeof n->address, "%s", n->machine_name);
    else snprintf(n->address, sizeof n->address, "%s", host);
}

/* mkdir -p: every missing parent is created too. */
static int mkdirs(const char *dir) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) { errno = ENAMETOOLONG; return -1; }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int ensure_dir(const char *flag, const char *dir) {
    if (!dir || !*dir) { fprintf(stderr, "llmr-node: --%s is required\n", flag); return -1; }
    if (mkdirs(dir) != 0) {
        fprintf(stderr, "llmr-node: --%s %s: %s\n", flag, dir, strerror(errno));
        return -1;
    }
    if (access(dir, W_OK) != 0) {
        fprintf(stderr, "llmr-node: --%s %s: not writable: %s\n", flag, dir, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static llmr_node node;
    llmr_node *n = &node;
    const char *log_level = "info";
    const char *trace_dir = NULL;
    const char *join_key = NULL;
    int log_json = 0;
    char default_engines[PATH_MAX + 16] = "build/engines";
    /* The engines beside the binary (build/bin/../engines) when run from the source tree. */
    char exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
        exe[el] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) { *slash = '\0'; snprintf(default_engines, sizeof default_engines, "%s/../engines", exe); }
    }
    llmr_option opts[] = {
        {"router", "LLMR_ROUTER", LLMR_OPT_STRING, "http://127.0.0.1:8080", "router base URL", &n->cfg.router_url},
        {"listen", "LLMR_NODE_LISTEN", LLMR_OPT_STRING, "0.0.0.0:8081", "address:port of the node API", &n->cfg.listen},
        {"advertise-address", "LLMR_NODE_ADVERTISE_ADDRESS", LLMR_OPT_STRING, NULL,
         "host the router uses to reach this node (default: the --listen host, or the machine name)", &n->cfg.advertise_address},
        {"models-dir", "LLMR_MODELS_DIR", LLMR_OPT_STRING, "models", "where model snapshots are stored", &n->cfg.models_dir},
        {"engines-dir", "LLMR_ENGINES_DIR", LLMR_OPT_STRING, default_engines, "engine plugins (one folder each)", &n->cfg.engines_dir},
        {"state-dir", "LLMR_STATE_DIR", LLMR_OPT_STRING, "state", "node id and token (node.json)", &n->cfg.state_dir},
        {"gpu", "LLMR_GPU", LLMR_OPT_STRING, "auto", "auto (NVML when present) or none", &n->cfg.gpu},
        {"heartbeat-interval", "LLMR_HEARTBEAT_INTERVAL", LLMR_OPT_INT, "0",
         "seconds between heartbeats; 0 = the router's setting (5)", &n->cfg.heartbeat_interval_s},
        {"sync-interval", "LLMR_SYNC_INTERVAL", LLMR_OPT_INT, "0",
         "seconds between model-list polls; 0 = the router's setting, else 30", &n->cfg.sync_interval_s},
        {"max-concurrency", "LLMR_MAX_CONCURRENCY", LLMR_OPT_INT, "16",
         "inference requests served at once (engines batch them; each reserves KV memory for --max-context)", &n->cfg.max_concurrency},
        {"max-context", "LLMR_MAX_CONTEXT", LLMR_OPT_INT, "0",
         "longest sequence (prompt + output tokens) a request may hold; 0 = the engine's default", &n->cfg.max_context},
        {"max-request-mb", "LLMR_MAX_REQUEST_MB", LLMR_OPT_INT, "8",
         "largest request body in MiB (1..64; the router's prompts must fit)", &n->cfg.max_request_mb},
        {"max-parallel-downloads", "LLMR_MAX_PARALLEL_DOWNLOADS", LLMR_OPT_INT, "2",
         "models downloaded at once (1..64)", &n->cfg.max_parallel_downloads},
        {"download-streams", "LLMR_DOWNLOAD_STREAMS", LLMR_OPT_INT, "4",
         "files of one model downloaded at once (1..16)", &n->cfg.download_streams},
        {"keep-deleted-models", "LLMR_KEEP_DELETED_MODELS", LLMR_OPT_BOOL, "0",
         "keep the files of models deleted at the router (default: remove them from --models-dir)",
         &n->cfg.keep_deleted_models},
        {"prune-grace", "LLMR_PRUNE_GRACE", LLMR_OPT_INT, "60",
         "seconds a model missing from the router's list (not deleted by name) keeps its files, in case it comes back",
         &n->cfg.prune_grace_s},
        {"join-key", "LLMR_NODE_JOIN_KEY", LLMR_OPT_STRING, NULL,
         "the router's node join key (its --node-join-key), sent when registering", &join_key},
        {"trace-dir", "LLMR_NODE_TRACE_DIR", LLMR_OPT_STRING, NULL,
         "write every router message to DIR/KIND-NNNNNN-PID.json (tests, debugging)", &trace_dir},
        {"log-level", "LLMR_LOG_LEVEL", LLMR_OPT_STRING, "info", "debug, info, warn or error", &log_level},
        {"log-json", "LLMR_LOG_JSON", LLMR_OPT_BOOL, "0", "log JSON lines", &log_json},
    };
    int pr = llmr_options_parse("llmr-node", DESCRIPTION, opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (pr != 0) return pr > 0 ? 0 : 2;
    int level = llmr_log_level_parse(log_level);
    if (level < 0) { fprintf(stderr, "llmr-node: --log-level: unknown level '%s'\n", log_level); return 2; }
    llmr_log_init("node", level, log_json);
    if (n->cfg.heartbeat_interval_s < 0 || n->cfg.sync_interval_s < 0 || n->cfg.max_concurrency < 1 || n->cfg.max_context < 0 ||
        n->cfg.max_parallel_downloads < 1 || n->cfg.max_parallel_downloads > 64 || n->cfg.download_streams < 1 ||
        n->cfg.download_streams > LLMR_DL_STREAMS_MAX || n->cfg.prune_grace_s < 0 || n->cfg.max_request_mb < 1 ||
        n->cfg.max_request_mb > 64) {
        fprintf(stderr, "llmr-node: --heartbeat-interval/--sync-interval must be >= 0, --max-concurrency >= 1, "
                        "--max-context >= 0, --max-parallel-downloads 1..64, --download-streams 1..%d, --prune-grace >= 0, "
                        "--max-request-mb 1..64\n", LLMR_DL_STREAMS_MAX);
        return 2;
    }
    if (ensure_dir("models-dir", n->cfg.models_dir) || ensure_dir("state-dir", n->cfg.state_dir)) return 2;
    char err[2048];
    n->started_at = time(NULL);
    if (gethostname(n->machine_name, sizeof n->machine_name - 1) != 0 || !n->machine_name[0])
        snprintf(n->machine_name, sizeof n->machine_name, "unknown-host");
    if (!(n->gpus = llmr_gpu_inventory_create(n->cfg.gpu, err, sizeof err))) {
        fprintf(stderr, "llmr-node: %s\n", err);
        return 2;
    }
    size_t ngpu = llmr_gpu_inventory_count(n->gpus);
    if (ngpu == 0) log_warn("%s: running without a GPU (the router accepts this node only with --allow-cpu-nodes)",
                            llmr_gpu_inventory_note(n->gpus));
    llmr_gpu_info g0 = {.cc_major = -1, .cc_minor = -1};
    for (size_t i = 0; i < ngpu; i++) {
        llmr_gpu_info g;
        llmr_gpu_inventory_get(n->gpus, i, &g);
        if (i == 0) g0 = g;
        log_info("GPU %u: %s (%s), %.1f GiB, %.1f GiB free, compute %d.%d", g.index, g.name, g.uuid,
                 (double)g.mem_total / (1 << 30), (double)g.mem_free / (1 << 30), g.cc_major, g.cc_minor);
    }
    int rc = 1;
    llmr_node_engines_config ec = {.engines_dir = n->cfg.engines_dir, .has_gpu = ngpu > 0, .cc_major = g0.cc_major,
                                   .cc_minor = g0.cc_minor, .max_sessions = (unsigned)n->cfg.max_concurrency,
                                   .max_context = (unsigned)n->cfg.max_context};
    if (!(n->models = llmr_models_create())) { fprintf(stderr, "llmr-node: out of memory\n"); goto out; }
    if (!(n->engines = llmr_node_engines_create(&ec, err, sizeof err))) { fprintf(stderr, "llmr-node: %s\n", err); goto out; }
    if (!(n->loop = llmr_loop_create())) { fprintf(stderr, "llmr-node: cannot create the event loop\n"); goto out; }
    llmr_http_server_opts so = {.listen = n->cfg.listen, .max_body = (size_t)n->cfg.max_request_mb << 20};
    if (!(n->http = llmr_http_server_create(n->loop, &so, err, sizeof err))) {
        fprintf(stderr, "llmr-node: --listen %s: %s\n", n->cfg.listen, err);
        goto out;
    }
    n->port = llmr_http_server_port(n->http);
    default_address(n);
    if (llmr_node_api_init(n) != 0) { fprintf(stderr, "llmr-node: cannot add the API routes\n"); goto out; }
    if (!(n->generate = llmr_generate_create(n, err, sizeof err))) { fprintf(stderr, "llmr-node: %s\n", err); goto out; }
    if (!(n->router = llmr_router_client_create(n->cfg.router_url, n->cfg.state_dir, llmr_node_register_body, n, err,
                                                sizeof err))) {
        fprintf(stderr, "llmr-node: %s\n", err);
        goto out;
    }
    llmr_router_client_set_trace_dir(n->router, trace_dir);
    llmr_router_client_set_join_key(n->router, join_key);
    if (!(n->sync = llmr_sync_create(n, err, sizeof err)) || !(n->heartbeat = llmr_heartbeat_create(n, err, sizeof err))) {
        fprintf(stderr, "llmr-node: %s\n", err);
        goto out;
    }
    llmr_loop_handle_signals(n->loop, on_term, NULL, n);
    log_info("listening on %s (port %d), advertised as %s:%d; router %s; models in %s (%d download stream(s) per "
             "model; files of deleted models %s)", n->cfg.listen, n->port, n->address, n->port, n->cfg.router_url,
             n->cfg.models_dir, n->cfg.download_streams, n->cfg.keep_deleted_models ? "kept" : "removed");
    rc = llmr_loop_run(n->loop) == 0 ? 0 : 1;
out:
    atomic_store(&n->stop, 1);
    llmr_heartbeat_destroy(n->heartbeat);
    llmr_sync_destroy(n->sync);
    llmr_generate_destroy(n->generate);
    llmr_http_server_destroy(n->http);
    llmr_router_client_destroy(n->router);
    llmr_loop_destroy(n->loop);
    llmr_node_engines_destroy(n->engines);
    llmr_models_destroy(n->models);
    llmr_gpu_inventory_destroy(n->gpus);
    return rc;
}
