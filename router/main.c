/* main.c — llmr-router: flags, start-up order, shutdown. See router/router.h for the modules. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "router/api_openai.h"
#include "router/router.h"
#include "router/template_check.h"
#include "router/node_join.h"

static const char *DESCRIPTION =
    "llmr-router: the operator's front door. Registers models from a Hugging Face-compatible hub\n"
    "(POST /v0/models/register), keeps them in a SQLite registry (DATA_DIR/router.db), hands nodes\n"
    "their manifests, tracks nodes by heartbeat, and serves the OpenAI-compatible API: GET /v1/models,\n"
    "POST /v1/chat/completions, POST /v1/completions (balanced over nodes), GET /metrics.\n"
    "See docs/router.md, docs/api.md and docs/operations.md.\n"
    "Without an admin key it refuses to start, unless --insecure-no-auth is given (tests only).";

static router_ctx g_ctx;

static void on_term(void *p) {
    router_ctx *ctx = p;
    log_info("shutting down: finishing requests in flight");
    llmr_http_server_shutdown(ctx->http, 10000);
}

/* The default supported_models.json: the repository's, found beside the binary's build tree or in
 * the working directory. */
static const char *default_supported_models(void) {
    static char path[4096];
    const char *cands[] = {"supported_models.json", "router/supported_models.json"};
    for (int i = 0; i < 2; i++)
        if (access(cands[i], R_OK) == 0) return cands[i];
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0; /* build/bin */
        snprintf(path, sizeof path, "%.4000s/../../supported_models.json", exe);
        if (access(path, R_OK) == 0) return path;
    }
    return "supported_models.json";
}

/* Writes the port atomically (temp file + rename) so a reader never sees a partial number. */
static int write_port_file(const char *path, int port) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0) { unlink(tmp); return -1; }
    return 0;
}

static int run(router_ctx *ctx, const char *port_file) {
    char err[2048];
    router_config *c = &ctx->cfg;
    if (mkdir(c->data_dir, 0700) != 0 && errno != EEXIST) {
        log_error("--data-dir %s: cannot create: %s", c->data_dir, strerror(errno));
        return 1;
    }
    if (!(ctx->db = router_db_open(c->data_dir, 0, err, sizeof err))) { log_error("%s", err); return 1; }
    if (!(ctx->auth = router_auth_create(ctx->db, c->admin_key, c->insecure_no_auth, err, sizeof err))) {
        log_error("%s", err);
        return 1;
    }
    if (!(ctx->join = router_join_create(c->node_join_key, err, sizeof err))) { log_error("%s", err); return 1; }
    if (!router_join_required(ctx->join)) log_warn("no --node-join-key: any host that reaches this router can register a node");
    if (c->insecure_no_auth) log_warn("--insecure-no-auth: requests without a key are admitted (tests and demos only)");
    if (c->allow_cpu_nodes) log_warn("--allow-cpu-nodes: nodes without a GPU may join (tests and demos only)");
    const char *sm = c->supported_models ? c->supported_models : default_supported_models();
    if (!(ctx->artifacts = router_artifacts_load(sm, c->artifact_allowlist, err, sizeof err))) {
        log_error("--supported-models: %s", err);
        return 1;
    }
    if (!(ctx->hub = router_hub_http_create(c->hub_endpoint, c->hub_token, err, sizeof err))) {
        log_error("--hub-endpoint: %s", err);
        return 1;
    }
    ctx->check_template = router_template_check_available ? router_template_check : NULL;
    if (!(ctx->loop = llmr_loop_create())) { log_error("cannot create the event loop"); return 1; }
    llmr_http_server_opts ho = {.listen = c->listen, .max_body = (size_t)c->max_request_mb << 20};
    if (!(ctx->http = llmr_http_server_create(ctx->loop, &ho, err, sizeof err))) { log_error("--listen: %s", err); return 1; }
    if (router_auth_routes(ctx->auth, ctx->http) || router_models_init(ctx, err, sizeof err) ||
        router_nodes_init(ctx, err, sizeof err) || router_openai_init(ctx, err, sizeof err)) {
        log_error("%s", err);
        return 1;
    }
    llmr_loop_handle_signals(ctx->loop, on_term, NULL, ctx);
    if (router_dashboard_init(ctx, err, sizeof err)) { log_error("%s", err); return 1; }
    /* The port line is what scripts wait for (and read, with --listen HOST:0). */
    log_info("listening on port %d (data %s, hub %s, schema v%d)", llmr_http_server_port(ctx->http), c->data_dir,
             c->hub_endpoint, router_db_version(ctx->db));
    if (port_file && write_port_file(port_file, llmr_http_server_port(ctx->http)) != 0) {
        log_error("--port-file %s: cannot write: %s", port_file, strerror(errno));
        return 1;
    }
    int rc = llmr_loop_run(ctx->loop);
    router_openai_fini(ctx);
    log_info("stopped");
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    router_ctx *ctx = &g_ctx;
    router_config *c = &ctx->cfg;
    const char *log_level = NULL;
    const char *port_file = NULL;
    int log_json = 0;
    const char *hf = getenv("HF_ENDPOINT");
    llmr_option opts[] = {
        {"listen", "LLMR_LISTEN", LLMR_OPT_STRING, "127.0.0.1:8080", "address:port to serve on (port 0 = any)", &c->listen},
        {"data-dir", "LLMR_DATA_DIR", LLMR_OPT_STRING, "./llmr-router-data", "directory of the SQLite registry (router.db)", &c->data_dir},
        {"hub-endpoint", "LLMR_HUB_ENDPOINT", LLMR_OPT_STRING, hf && *hf ? hf : "https://huggingface.co",
         "Hugging Face-compatible hub (default: $HF_ENDPOINT, else https://huggingface.co)", &c->hub_endpoint},
        {"hub-token", "HF_TOKEN", LLMR_OPT_STRING, NULL, "hub token for gated or private repos", &c->hub_token},
        {"admin-key", "LLMR_ADMIN_KEY", LLMR_OPT_STRING, NULL, "the operator's key (at least 16 characters)", &c->admin_key},
        {"supported-models", "LLMR_SUPPORTED_MODELS", LLMR_OPT_STRING, NULL,
         "official GPU artifacts per model (default: supported_models.json of the repo)", &c->supported_models},
        {"artifact-allowlist", "LLMR_ARTIFACT_ALLOWLIST", LLMR_OPT_STRING, "openai/*,nvidia/*",
         "comma-separated repo globs whose artifacts may enter manifests", &c->artifact_allowlist},
        {"allow-cpu-nodes", "LLMR_ALLOW_CPU_NODES", LLMR_OPT_BOOL, "false",
         "accept nodes without a GPU and let them offer CPU engines (tests and demos only)", &c->allow_cpu_nodes},
        {"insecure-no-auth", "LLMR_INSECURE_NO_AUTH", LLMR_OPT_BOOL, "false",
         "admit requests without a key (tests and demos only)", &c->insecure_no_auth},
        {"node-join-key", "LLMR_NODE_JOIN_KEY", LLMR_OPT_STRING, NULL,
         "key nodes must send to join (at least 16 characters; default: anyone may join)", &c->node_join_key},
        {"heartbeat-interval", "LLMR_HEARTBEAT_INTERVAL", LLMR_OPT_INT, "5", "seconds between node heartbeats (told to nodes)",
         &c->heartbeat_interval_s},
        {"heartbeat-timeout", "LLMR_HEARTBEAT_TIMEOUT", LLMR_OPT_INT, "0",
         "seconds of silence before a node is offline (0 = 3 heartbeat intervals)", &c->heartbeat_timeout_s},
        {"sync-interval", "LLMR_SYNC_INTERVAL", LLMR_OPT_INT, "30", "seconds between nodes' own registry polls (told to nodes)",
         &c->sync_interval_s},
        {"max-registrations", "LLMR_MAX_REGISTRATIONS", LLMR_OPT_INT, "8", "registrations validated at once (more get 429)",
         &c->max_registrations},
        {"queue-max", "LLMR_QUEUE_MAX", LLMR_OPT_INT, "64",
         "inference requests that may wait when every node is full (more get 429)", &c->queue_max},
        {"queue-timeout-ms", "LLMR_QUEUE_TIMEOUT_MS", LLMR_OPT_INT, "30000",
         "how long a request may wait for a free node (then 504)", &c->queue_timeout_ms},
        {"max-request-mb", "LLMR_MAX_REQUEST_MB", LLMR_OPT_INT, "8",
         "largest request body in MiB (1..64; larger ones get 413)", &c->max_request_mb},
        {"port-file", NULL, LLMR_OPT_STRING, NULL, "write the bound port to this file once listening", &port_file},
        {"log-level", "LLMR_LOG_LEVEL", LLMR_OPT_STRING, "info", "debug, info, warn or error", &log_level},
        {"log-json", "LLMR_LOG_JSON", LLMR_OPT_BOOL, "false", "log JSON lines", &log_json},
    };
    int prc = llmr_options_parse("llmr-router", DESCRIPTION, opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    if (prc > 0) return 0;
    if (prc < 0) return 2;
    int level = llmr_log_level_parse(log_level);
    if (level < 0) { fprintf(stderr, "error: --log-level '%s': expected debug, info, warn or error\n", log_level); return 2; }
    llmr_log_init("router", level, log_json);
    if (c->heartbeat_interval_s < 1 || c->heartbeat_interval_s > 3600) {
        fprintf(stderr, "error: --heartbeat-interval must be 1..3600 seconds\n");
        return 2;
    }
    if (c->heartbeat_timeout_s <= 0) c->heartbeat_timeout_s = 3 * c->heartbeat_interval_s;
    if (c->queue_max < 0 || c->queue_timeout_ms < 1) {
        fprintf(stderr, "error: --queue-max must be >= 0 and --queue-timeout-ms >= 1\n");
        return 2;
    }
    if (c->max_request_mb < 1 || c->max_request_mb > 64) {
        fprintf(stderr, "error: --max-request-mb must be 1..64\n");
        return 2;
    }
    if (c->sync_interval_s < 1) { fprintf(stderr, "error: --sync-interval must be at least 1 second\n"); return 2; }
    if (!c->admin_key && !c->insecure_no_auth) {
        fprintf(stderr, "error: no admin key: set --admin-key or LLMR_ADMIN_KEY (or --insecure-no-auth, tests only)\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_mutex_init(&ctx->jobs_mu, NULL);
    pthread_cond_init(&ctx->jobs_cv, NULL);
    int rc = run(ctx, port_file);
    /* Workers still talking to a slow hub get 15 s; past that the process exits under them, which
     * the registry survives like a kill -9 (no 201 was sent for their work). */
    int left = router_jobs_wait(ctx, 15000);
    if (left > 0) {
        log_warn("exiting with %d worker(s) still running (slow hub or node); their work is abandoned", left);
        return rc;
    }
    router_nodes_fini(ctx);
    llmr_http_server_destroy(ctx->http);
    llmr_loop_destroy(ctx->loop);
    router_hub_destroy(ctx->hub);
    router_artifacts_destroy(ctx->artifacts);
    router_auth_destroy(ctx->auth);
    router_join_destroy(ctx->join);
    router_db_close(ctx->db);
    curl_global_cleanup();
    return rc;
}
