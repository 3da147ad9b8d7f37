/* llmr-engines — inspect engine plugins and GPUs the way the node sees them.
 *
 *   llmr-engines validate PATH...           validate manifests (a manifest.json or a plugin folder)
 *   llmr-engines list [options]             scan an engines folder: loaded plugins and rejections
 *   llmr-engines select [options] --id ID --architecture A [--format F] [--runtime R]
 *                       [--artifact NAME=PATH]...   which engine would run a model, or why none
 *   llmr-engines metrics [options]          the engine part of the node's /metrics
 *   llmr-engines heartbeat [options]        the engine part of the node's heartbeat (JSON)
 *   llmr-engines gpus                       GPU inventory through NVML (dlopened)
 * options: --engines-dir DIR (default: build/engines beside this binary), --backend B (cuda),
 *          --cc MAJOR.MINOR
 * Exit status: 0 success, 1 a manifest/plugin was rejected or no engine fits, 2 usage error. */
#include "common/log.h"
#include "llmr_engine.h"
#include "node/engine/engine_host.h"
#include "node/engine/engine_manifest.h"
#include "node/gpu/nvml.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fputs("usage: llmr-engines COMMAND [options]\n"
          "  validate PATH...        check manifest.json files (or plugin folders) against\n"
          "                          schema/engine-manifest.schema.json; names the field at fault\n"
          "  list                    scan the engines folder: plugins loaded, plugins rejected\n"
          "  select --id ID --architecture ARCH [--format safetensors] [--runtime RT]\n"
          "         [--artifact NAME=PATH]...  which engine would run the model (FR-008), or why none\n"
          "  metrics                 print the engine host's Prometheus metrics\n"
          "  heartbeat               print the engine host's part of the node heartbeat (JSON)\n"
          "  gpus                    list GPUs through NVML (no NVML: says why)\n"
          "options:\n"
          "  --engines-dir DIR       plugin folder (default: ../engines beside this binary)\n"
          "  --backend B             cuda (default), metal, rocm or cpu\n"
          "  --cc MAJOR.MINOR        GPU compute capability for min_compute_capability checks\n"
          "  -h, --help              this text\n"
          "exit status: 0 ok, 1 rejected / unsupported, 2 usage error\n", f);
}

static int cmd_validate(int argc, char **argv) {
    if (argc < 1) { usage(stderr); return 2; }
    int bad = 0;
    for (int i = 0; i < argc; i++) {
        char dir[4096], err[1024];
        struct stat st;
        snprintf(dir, sizeof dir, "%s", argv[i]);
        llmr_engine_manifest *m = NULL;
        int rc;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = llmr_engine_manifest_load(dir, &m, err, sizeof err);
        } else {
            FILE *f = fopen(argv[i], "rb");
            if (!f) { fprintf(stdout, "REJECT %s: cannot open\n", argv[i]); bad = 1; continue; }
            static char buf[LLMR_MANIFEST_MAX_BYTES + 2];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
            rc = llmr_engine_manifest_parse(buf, n, dir, argv[i], &m, err, sizeof err);
        }
        if (rc == 0) printf("OK     %s: %s %s (ABI %u.%u)\n", argv[i], m->id, m->version,
                            LLMR_ENGINE_ABI_MAJOR_OF(m->abi_version), LLMR_ENGINE_ABI_MINOR_OF(m->abi_version));
        else { printf("REJECT %s\n", err); bad = 1; }
        llmr_engine_manifest_free(m);
    }
    return bad;
}

typedef struct opts {
    const char *engines_dir, *backend, *id, *arch, *format, *runtime;
    int cc_major, cc_minor;
    llmr_artifact arts[32];
    size_t n_arts;
} opts;

static int parse_opts(int argc, char **argv, opts *o) {
    for (int i = 0; i < argc; i += 2) { /* options come in pairs: --name value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "llmr-engines: %s needs a value\n", a); return -1; }
        if (strcmp(a, "--engines-dir") == 0) o->engines_dir = v;
        else if (strcmp(a, "--backend") == 0) o->backend = v;
        else if (strcmp(a, "--id") == 0) o->id = v;
        else if (strcmp(a, "--architecture") == 0) o->arch = v;
        else if (strcmp(a, "--format") == 0) o->format = v;
        else if (strcmp(a, "--runtime") == 0) o->runtime = v;
        else if (strcmp(a, "--cc") == 0) {
            if (sscanf(v, "%d.%d", &o->cc_major, &o->cc_minor) != 2) { fprintf(stderr, "llmr-engines: --cc wants MAJOR.MINOR\n"); return -1; }
        } else if (strcmp(a, "--artifact") == 0) {
            char *eq = strchr(argv[i + 1], '=');
            if (!eq || o->n_arts == 32) { fprintf(stderr, "llmr-engines: --artifact wants NAME=PATH (at most 32)\n"); return -1; }
            *eq = 0;
            o->arts[o->n_arts].name = argv[i + 1];
            o->arts[o->n_arts++].path = eq + 1;
        } else { fprintf(stderr, "llmr-engines: unknown option %s\n", a); return -1; }
    }
    return 0;
}

static llmr_engine_host *open_host(const opts *o) {
    static char dflt[4096];
    const char *dir = o->engines_dir;
    if (!dir) {
        if (llmr_engine_host_default_dir(dflt, sizeof dflt) != 0) { fprintf(stderr, "llmr-engines: no --engines-dir\n"); return NULL; }
        dir = dflt;
    }
    llmr_engine_host_config cfg = {0};
    cfg.engines_dir = dir;
    cfg.backend = o->backend;
    cfg.cc_major = o->cc_major;
    cfg.cc_minor = o->cc_minor;
    cfg.no_thread = 1;
    cfg.no_watch = 1;
    llmr_engine_host *h = NULL;
    char err[1024];
    if (llmr_engine_host_create(&cfg, &h, err, sizeof err) != LLMR_ENGINE_OK) {
        fprintf(stderr, "llmr-engines: %s\n", err);
        return NULL;
    }
    return h;
}

static int cmd_list(llmr_engine_host *h) {
    llmr_host_plugin_info *p;
    size_t n;
    if (llmr_engine_host_plugins(h, &p, &n) != 0) return 1;
    for (size_t i = 0; i < n; i++)
        printf("engine %s %s ABI %u.%u %s\n", p[i].id, p[i].version, p[i].abi_version >> 16, p[i].abi_version & 0xffff, p[i].dir);
    free(p);
    size_t nr = llmr_engine_host_rejections(h, 0, NULL, 0);
    for (size_t i = 0; i < nr; i++) {
        char msg[1024];
        llmr_engine_host_rejections(h, i, msg, sizeof msg);
        printf("rejected %s\n", msg);
    }
    return nr ? 1 : 0;
}

static int cmd_select(llmr_engine_host *h, const opts *o) {
    if (!o->id || !o->arch) { fprintf(stderr, "llmr-engines: select needs --id and --architecture\n"); return 2; }
    llmr_model_descriptor d = {sizeof d, o->id, o->format ? o->format : "safetensors", o->runtime ? o->runtime : "unknown",
                               o->arch, NULL, NULL};
    char eid[65], ap[4096], err[4096];
    if (llmr_engine_host_select(h, &d, o->arts, o->n_arts, eid, sizeof eid, ap, sizeof ap, err, sizeof err) != LLMR_ENGINE_OK) {
        printf("unsupported: %s\n", err);
        return 1;
    }
    printf("engine %s%s%s\n", eid, ap[0] ? " artifact " : "", ap);
    return 0;
}

static int cmd_gpus(void) {
    char err[512], drv[96];
    llmr_nvml *n = llmr_nvml_open(err, sizeof err);
    if (!n) { printf("%s\n", err); return 1; }
    unsigned count = 0;
    int rc = 0;
    if (llmr_nvml_device_count(n, &count, err, sizeof err) != 0) { printf("%s\n", err); rc = 1; }
    if (llmr_nvml_driver_version(n, drv, sizeof drv, err, sizeof err) == 0) printf("driver %s\n", drv);
    for (unsigned i = 0; i < count; i++) {
        llmr_gpu_info g;
        if (llmr_nvml_device_info(n, i, &g, err, sizeof err) != 0) { printf("gpu %u: %s\n", i, err); rc = 1; continue; }
        printf("gpu %u %s %s cc %d.%d memory %llu total %llu free\n", i, g.uuid, g.name, g.cc_major, g.cc_minor,
               (unsigned long long)g.mem_total, (unsigned long long)g.mem_free);
    }
    llmr_nvml_close(n);
    return rc;
}

int main(int argc, char **argv) {
    llmr_log_init("llmr-engines", LLMR_LOG_ERROR, 0); /* rejections are printed, not logged twice */
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(stdout); return 0; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "validate") == 0) return cmd_validate(argc - 2, argv + 2);
    if (strcmp(cmd, "gpus") == 0) return cmd_gpus();
    if (strcmp(cmd, "list") && strcmp(cmd, "select") && strcmp(cmd, "metrics") && strcmp(cmd, "heartbeat")) {
        fprintf(stderr, "llmr-engines: unknown command %s\n", cmd);
        usage(stderr);
        return 2;
    }
    opts o;
    memset(&o, 0, sizeof o);
    if (parse_opts(argc - 2, argv + 2, &o) != 0) return 2;
    llmr_engine_host *h = open_host(&o);
    if (!h) return 2;
    int rc = 0;
    if (strcmp(cmd, "list") == 0) rc = cmd_list(h);
    else if (strcmp(cmd, "select") == 0) rc = cmd_select(h, &o);
    else if (strcmp(cmd, "metrics") == 0) {
        llmr_engine_host_poll(h, NULL, NULL, 0);
        rc = llmr_engine_host_write_metrics(h, stdout) == 0 ? 0 : 1;
    } else {
        llmr_engine_host_poll(h, NULL, NULL, 0);
        json_t *hb = llmr_engine_host_heartbeat_json(h);
        rc = hb && json_dumpf(hb, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? 0 : 1;
        putchar('\n');
        json_decref(hb);
    }
    llmr_engine_host_destroy(h);
    return rc;
}
