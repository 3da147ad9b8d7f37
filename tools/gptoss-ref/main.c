/* llmr-gptoss-ref — runs the C reference forward pass (common/gptoss/ref_model.h) on a token list and,
 * with --compare, checks it against a transformers dump written by tests/gpu/parity/hf_reference.py. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gptoss/ref_model.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: llmr-gptoss-ref --model DIR (--tokens FILE.json | --compare HFDIR) [options]\n"
            "\n"
            "Runs the fp32 C reference of gpt-oss over a prompt of token ids.\n"
            "  --model DIR       checkpoint folder (config.json + safetensors shards)\n"
            "  --tokens FILE     JSON array of token ids (or {\"tokens\": [...]})\n"
            "  --compare HFDIR   a hf_reference.py output folder: its prompt is run, and the per-layer hidden\n"
            "                    states and final logits at its saved positions are compared (relative L2),\n"
            "                    positions whose router 4th/5th gap is < 1e-3 in any layer reported apart\n"
            "  --greedy N        generate N tokens greedily after the prompt and print them with top-2 margins\n"
            "                    (with --compare, checked against the dump's greedy run)\n"
            "  --tol X           with --compare: exit 1 when a logits relative L2 error exceeds X (default 1e-4)\n"
            "  --threads N       threads for the lm_head (default: online CPUs)\n"
            "  --help            this text\n"
            "Exit status: 0 ok (and within --tol), 1 mismatch, 2 usage or input error.\n");
}

static int read_tokens_json(json_t *j, int32_t **out, int *n) {
    if (json_is_object(j)) j = json_object_get(j, "tokens");
    if (!json_is_array(j) || json_array_size(j) == 0) return -1;
    *n = (int)json_array_size(j);
    *out = malloc((size_t)*n * sizeof **out);
    if (!*out) return -1;
    for (int i = 0; i < *n; i++) {
        json_t *v = json_array_get(j, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff) { free(*out); return -1; }
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    return 0;
}

static float *read_f32(const char *dir, const char *name, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "llmr-gptoss-ref: %s: cannot open\n", path); return NULL; }
    float *p = malloc(n * sizeof *p);
    size_t got = p ? fread(p, sizeof *p, n, f) : 0;
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (!p || got != n || extra) {
        fprintf(stderr, "llmr-gptoss-ref: %s: expected exactly %zu float32 values\n", path, n);
        free(p);
        return NULL;
    }
    return p;
}

static double rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int argmax(const float *x, int n, float *margin) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > second) second = x[i];
    if (margin) *margin = x[b] - second;
    return b;
}

typedef struct hf_dump {
    json_t *index;
    int T, P, L, H, V;
    int *positions;   /* [P] */
    float *logits;    /* [P, V] */
    float *hidden;    /* [L, P, H] */
    json_t *min_gap;  /* [T] */
    json_t *greedy;   /* {"tokens": [...], "top2_margin": [...]} or NULL */
} hf_dump;

static int load_dump(const char *dir, hf_dump *d, int32_t **tokens) {
    char path[4096];
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_error_t je;
    memset(d, 0, sizeof *d);
    d->index = json_load_file(path, 0, &je);
    if (!d->index) { fprintf(stderr, "llmr-gptoss-ref: %s: %s\n", path, je.text); return -1; }
    json_t *pos = json_object_get(d->index, "positions");
    d->L = (int)json_integer_value(json_object_get(d->index, "num_layers"));
    d->H = (int)json_integer_value(json_object_get(d->index, "hidden_size"));
    d->V = (int)json_integer_value(json_object_get(d->index, "vocab_size"));
    d->min_gap = json_object_get(d->index, "min_router_gap");
    d->greedy = json_object_get(d->index, "greedy");
    if (read_tokens_json(json_object_get(d->index, "tokens"), tokens, &d->T) || !json_is_array(pos) || d->L <= 0 || d->H <= 0 || d->V <= 0) {
        fprintf(stderr, "llmr-gptoss-ref: %s: not a hf_reference.py index (tokens, positions, sizes)\n", path);
        return -1;
    }
    d->P = (int)json_array_size(pos);
    d->positions = malloc((size_t)d->P * sizeof *d->positions);
    if (!d->positions) return -1;
    for (int i = 0; i < d->P; i++) {
        d->positions[i] = (int)json_integer_value(json_array_get(pos, (size_t)i));
        if (d->positions[i] < 0 || d->positions[i] >= d->T) { fprintf(stderr, "llmr-gptoss-ref: %s: position out of range\n", path); return -1; }
    }
    d->logits = read_f32(dir, "logits.f32", (size_t)d->P * (size_t)d->V);
    d->hidden = read_f32(dir, "hidden.f32", (size_t)d->L * (size_t)d->P * (size_t)d->H);
    return d->logits && d->hidden ? 0 : -1;
}

static void free_dump(hf_dump *d) {
    json_decref(d->index);
    free(d->positions);
    free(d->logits);
    free(d->hidden);
}

int main(int argc, char **argv) {
    const char *model_dir = NULL, *tokens_path = NULL, *cmp_dir = NULL;
    int greedy = 0;
    double tol = 1e-4;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > 0 ? (int)cpus : 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (strcmp(a, "--model") && strcmp(a, "--tokens") && strcmp(a, "--compare") && strcmp(a, "--greedy") && strcmp(a, "--threads") &&
            strcmp(a, "--tol")) {
            fprintf(stderr, "llmr-gptoss-ref: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!v) { fprintf(stderr, "llmr-gptoss-ref: %s needs a value (see --help)\n", a); return 2; }
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--tokens")) tokens_path = v;
        else if (!strcmp(a, "--compare")) cmp_dir = v;
        else if (!strcmp(a, "--greedy") || !strcmp(a, "--threads")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 1000000) { fprintf(stderr, "llmr-gptoss-ref: %s '%s' is not a count\n", a, v); return 2; }
            if (!strcmp(a, "--greedy")) greedy = (int)n;
            else threads = (int)n;
        } else if (!strcmp(a, "--tol")) {
            char *end;
            tol = strtod(v, &end);
            if (*end || !(tol > 0)) { fprintf(stderr, "llmr-gptoss-ref: --tol '%s' must be a positive number\n", v); return 2; }
        }
        else { fprintf(stderr, "llmr-gptoss-ref: unknown option '%s' (see --help)\n", a); return 2; }
        i++;
    }
    if (threads < 1) { fprintf(stderr, "llmr-gptoss-ref: --threads must be at least 1\n"); return 2; }
    if (!model_dir || (!tokens_path && !cmp_dir)) {
        fprintf(stderr, "llmr-gptoss-ref: --model and --tokens or --compare are required (see --help)\n");
        return 2;
    }
    int32_t *tokens = NULL;
    int T = 0;
    hf_dump d = {0};
    if (cmp_dir) {
        if (load_dump(cmp_dir, &d, &tokens)) { free_dump(&d); free(tokens); return 2; }
        T = d.T;
        if (greedy == 0 && d.greedy) greedy = (int)json_array_size(json_object_get(d.greedy, "tokens"));
    } else {
        json_error_t je;
        json_t *j = json_load_file(tokens_path, 0, &je);
        int bad = !j || read_tokens_json(j, &tokens, &T);
        json_decref(j);
        if (bad) { fprintf(stderr, "llmr-gptoss-ref: %s: expected a JSON array of token ids\n", tokens_path); return 2; }
    }
    char err[1024];
    gptoss_ref_model *m = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = gptoss_ref_load(model_dir, threads, 0, &m, err, sizeof err);
    if (st) { fprintf(stderr, "llmr-gptoss-ref: %s\n", err); free_dump(&d); free(tokens); return 2; }
    const gptoss_config *c = gptoss_ref_config(m);
    if (cmp_dir && (d.L != c->num_layers || d.H != c->hidden_size || d.V != c->vocab_size)) {
        fprintf(stderr, "llmr-gptoss-ref: %s does not match %s (layers/hidden/vocab)\n", cmp_dir, model_dir);
        gptoss_ref_free(m); free_dump(&d); free(tokens);
        return 2;
    }
    const int L = c->num_layers, H = c->hidden_size, V = c->vocab_size;
    gptoss_ref_state *s = gptoss_ref_state_create(m, T + greedy + 1);
    float *logits = malloc((size_t)V * 4), *layers = malloc((size_t)L * H * 4);
    if (!s || !logits || !layers) { fprintf(stderr, "llmr-gptoss-ref: out of memory\n"); return 2; }
    gptoss_ref_trace tr = {.layer_out = layers};
    int rc = 0, pi = 0, excluded = 0, compared = 0;
    double worst = 0, worst_layer = 0;
    for (int t = 0; t < T; t++) {
        int saved = cmp_dir && pi < d.P && d.positions[pi] == t;
        int want = saved || t == T - 1;
        if (gptoss_ref_forward(m, s, tokens[t], want ? logits : NULL, saved ? &tr : NULL, err, sizeof err)) {
            fprintf(stderr, "llmr-gptoss-ref: position %d: %s\n", t, err);
            return 2;
        }
        if (!saved) continue;
        double gap = json_real_value(json_array_get(d.min_gap, (size_t)t));
        double e_logits = rel_l2(logits, d.logits + (size_t)pi * V, (size_t)V), e_layer_max = 0;
        printf("pos %5d  logits rel L2 %.3e  layers", t, e_logits);
        for (int l = 0; l < L; l++) {
            double e = rel_l2(layers + (size_t)l * H, d.hidden + ((size_t)l * d.P + (size_t)pi) * H, (size_t)H);
            if (e > e_layer_max) e_layer_max = e;
            printf(" %.1e", e);
        }
        int near_tie = gap < 1e-3;
        printf("  router gap %.2e%s\n", gap, near_tie ? "  (near tie: excluded)" : "");
        if (near_tie) excluded++;
        else {
            compared++;
            if (e_logits > worst) worst = e_logits;
            if (e_layer_max > worst_layer) worst_layer = e_layer_max;
        }
        pi++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("prompt of %d tokens in %.2f s (load included)\n", T, secs);
    if (cmp_dir) {
        printf("compared %d positions (%d excluded for router near-ties): max logits rel L2 %.3e, max layer rel L2 %.3e (tol %.1e)\n",
               compared, excluded, worst, worst_layer, tol);
        if (worst > tol) rc = 1;
    }
    if (greedy > 0) {
        json_t *ref_tokens = d.greedy ? json_object_get(d.greedy, "tokens") : NULL;
        json_t *ref_margin = d.greedy ? json_object_get(d.greedy, "top2_margin") : NULL;
        int diverged = -1;
        printf("greedy:");
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int g = 0; g < greedy; g++) {
            float margin;
            int tok = argmax(logits, V, &margin);
            printf(" %d(%.3f)", tok, margin);
            if (ref_tokens && g < (int)json_array_size(ref_tokens) && diverged < 0 &&
                json_integer_value(json_array_get(ref_tokens, (size_t)g)) != tok) {
                diverged = g;
                printf("[reference %lld, margin %.2e]", (long long)json_integer_value(json_array_get(ref_tokens, (size_t)g)),
                       json_real_value(json_array_get(ref_margin, (size_t)g)));
            }
            if (g + 1 < greedy && gptoss_ref_forward(m, s, tok, logits, NULL, err, sizeof err)) {
                fprintf(stderr, "\nllmr-gptoss-ref: %s\n", err);
                rc = 2;
                break;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("\n%d tokens in %.2f s (%.1f tokens/s)\n", greedy, secs, greedy / (secs > 0 ? secs : 1e-9));
        if (ref_tokens) {
            if (diverged < 0) printf("greedy continuation identical to the reference\n");
            else {
                double mg = json_real_value(json_array_get(ref_margin, (size_t)diverged));
                printf("greedy diverged at step %d (reference top-2 margin %.2e)\n", diverged, mg);
                if (mg > 1e-3) rc = 1;
            }
        }
    }
    gptoss_ref_state_destroy(s);
    gptoss_ref_free(m);
    free(logits);
    free(layers);
    free(tokens);
    free_dump(&d);
    return rc;
}
