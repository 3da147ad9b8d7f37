/* llmr-mkmodel — writes a synthetic gpt-oss checkpoint in the exact Hugging Face layout
 * (common/gptoss/synth.h tells what is in it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/gptoss/synth.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: llmr-mkmodel --preset tiny|small|20b-2l|20b --seed N --out DIR [options]\n"
            "\n"
            "Writes a gpt-oss checkpoint with random weights in the Hugging Face layout: config.json,\n"
            "generation_config.json, model.safetensors.index.json, model-0000i-of-0000N.safetensors shards\n"
            "(at least two), chat_template.jinja and the tokenizer files. Same seed, same bytes.\n"
            "\n"
            "  --preset NAME         tiny (4 layers, hidden 64, 4 of 8 experts), small (6 layers, hidden 256,\n"
            "                        4 of 16 experts), 20b-2l (the 20b's shapes, 2 layers, 3.27 GB) or 20b\n"
            "                        (the real shapes, 13.76 GB)\n"
            "  --seed N              weight seed (unsigned 64-bit)\n"
            "  --out DIR             output folder (created if missing; files in it are replaced)\n"
            "  --tokenizer-dir DIR   folder with tokenizer.json + tokenizer_config.json to copy\n"
            "                        (default $LLMR_CACHE/tokenizer-gptoss or ~/.cache/llmr/tokenizer-gptoss;\n"
            "                        skipped with a note when absent)\n"
            "  --chat-template FILE  template to ship as chat_template.jinja (default\n"
            "                        tests/data/gptoss/chat_template.jinja under the current folder or the\n"
            "                        source tree this binary was built in; skipped with a note when absent)\n"
            "  --threads N           writer threads (default: online CPUs); output does not depend on it\n"
            "  --shard-cap BYTES     start a new shard past this payload size (default 20b: 4800000000 as\n"
            "                        the HF converter; tiny/small: 3/8 of the layer bytes, so layers straddle)\n"
            "  --dry-run             print the shard plan, write nothing\n"
            "  --help                this text\n");
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The template: ./tests/data/gptoss/chat_template.jinja, else relative to the binary (build/bin/..). */
static const char *default_template(char *buf, size_t n) {
    const char *rel = "tests/data/gptoss/chat_template.jinja";
    if (is_file(rel)) return rel;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return NULL;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0;
    int w = snprintf(buf, n, "%s/../../%s", exe, rel);
    return w > 0 && (size_t)w < n && is_file(buf) ? buf : NULL;
}

int main(int argc, char **argv) {
    gptoss_synth_options o = {0};
    const char *tok_dir = NULL, *tmpl = NULL;
    int have_seed = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = cpus > 0 ? (int)cpus : 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--dry-run")) o.dry_run = 1;
        else if (strcmp(a, "--preset") && strcmp(a, "--out") && strcmp(a, "--tokenizer-dir") && strcmp(a, "--chat-template") &&
                 strcmp(a, "--seed") && strcmp(a, "--threads") && strcmp(a, "--shard-cap")) {
            fprintf(stderr, "llmr-mkmodel: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (!v) { fprintf(stderr, "llmr-mkmodel: %s needs a value (see --help)\n", a); return 2; }
        else if (!strcmp(a, "--preset")) { o.preset = v; i++; }
        else if (!strcmp(a, "--out")) { o.out_dir = v; i++; }
        else if (!strcmp(a, "--tokenizer-dir")) { tok_dir = v; i++; }
        else if (!strcmp(a, "--chat-template")) { tmpl = v; i++; }
        else if (!strcmp(a, "--seed")) {
            if (parse_u64(v, &o.seed)) { fprintf(stderr, "llmr-mkmodel: --seed '%s' is not an unsigned integer\n", v); return 2; }
            have_seed = 1; i++;
        } else if (!strcmp(a, "--threads")) {
            if (parse_u64(v, &u) || u < 1 || u > 256) { fprintf(stderr, "llmr-mkmodel: --threads '%s' must be 1..256\n", v); return 2; }
            o.threads = (int)u; i++;
        } else if (!strcmp(a, "--shard-cap")) {
            if (parse_u64(v, &u) || u < 1) { fprintf(stderr, "llmr-mkmodel: --shard-cap '%s' must be a positive byte count\n", v); return 2; }
            o.shard_cap = u; i++;
        } else { fprintf(stderr, "llmr-mkmodel: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!o.preset || !have_seed || (!o.out_dir && !o.dry_run)) {
        fprintf(stderr, "llmr-mkmodel: --preset, --seed and --out are required (see --help)\n");
        return 2;
    }
    char tok_buf[4096], tmpl_buf[4096];
    if (!tok_dir) {
        const char *cache = getenv("LLMR_CACHE");
        if (cache && *cache) snprintf(tok_buf, sizeof tok_buf, "%s/tokenizer-gptoss", cache);
        else snprintf(tok_buf, sizeof tok_buf, "%s/.cache/llmr/tokenizer-gptoss", getenv("HOME") ? getenv("HOME") : "/tmp");
        tok_dir = tok_buf;
    }
    o.tokenizer_dir = tok_dir;
    o.chat_template_path = tmpl ? tmpl : default_template(tmpl_buf, sizeof tmpl_buf);
    if (!o.chat_template_path && !o.dry_run) fprintf(stderr, "llmr-mkmodel: note: no chat template found; chat_template.jinja not written\n");

    char err[1024];
    gptoss_synth_report rep;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (gptoss_synth_write(&o, &rep, err, sizeof err)) {
        fprintf(stderr, "llmr-mkmodel: %s\n", err);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s preset %s seed %llu: %d tensors, %d shards, total_size %llu bytes",
           o.dry_run ? "plan for" : "wrote", o.preset, (unsigned long long)o.seed, rep.n_tensors, rep.n_shards,
           (unsigned long long)rep.total_size);
    if (!o.dry_run) printf(" in %.1f s (%d threads) to %s", secs, o.threads, o.out_dir);
    printf("\n");
    for (int i = 0; i < rep.n_shards && i < 64; i++)
        printf("  model-%05d-of-%05d.safetensors payload %llu bytes\n", i, rep.n_shards - 1, (unsigned long long)rep.shard_payload[i]);
    if (!o.dry_run && !rep.tokenizer_copied) fprintf(stderr, "llmr-mkmodel: note: no tokenizer.json in %s; tokenizer files not written\n", tok_dir);
    return 0;
}
