/* bench/tokenizer — load time and single-thread encode/decode throughput of common/tokenizer.
 *
 *   build/bench/tokenizer [--tokenizer PATH] [--corpus PATH | --size BYTES] [--write-corpus PATH]
 *                         [--chunk BYTES] [--rounds N] [--threads N]
 *
 * Without --corpus a mixed corpus (prose, code, CJK, Japanese, emoji, RTL, digits, whitespace
 * runs; default 10 MB) is generated from the tests/data/tokenizer text files with a fixed seed, so every
 * run and every implementation sees the same bytes; --write-corpus saves it for
 * bench/tokenizer/lenml_bench.js and bench/tokenizer/hf_tokenizers.py. The corpus is encoded in
 * chunks of --chunk bytes (default 100000) each extended to the next '\n', the rule the other two
 * scripts use. Output: one "key: value" line per figure. Run from the repository root. */
#include "common/tokenizer/tokenizer.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: build/bench/tokenizer [--tokenizer PATH] [--corpus PATH | --size BYTES]\n"
            "                             [--write-corpus PATH] [--chunk BYTES] [--rounds N] [--threads N]\n"
            "Prints tokenizer load ms and encode/decode MB/s (single thread; --threads N adds an\n"
            "N-thread encode figure on one shared tokenizer). Default tokenizer:\n"
            "$LLMR_CACHE/tokenizer-gptoss/tokenizer.json; default corpus: 10 MB generated from\n"
            "tests/data/tokenizer/*.txt (run from the repository root). --write-corpus PATH saves\n"
            "the corpus and exits (for lenml_bench.js and hf_tokenizers.py).\n");
}

/* --- corpus ---------------------------------------------------------------------------------- */

typedef struct buf { char *p; size_t len, cap; } buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 1 << 20;
        b->p = realloc(b->p, b->cap);
        if (!b->p) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Lines of every corpus file, as (pointer, length) into one buffer. */
typedef struct lines { buf all; size_t *off, *len, n; } lines;

static int load_lines(lines *L) {
    DIR *d = opendir("tests/data/tokenizer");
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".txt") || !strcmp(e->d_name, "specials.txt")) continue;
        char path[600];
        snprintf(path, sizeof path, "tests/data/tokenizer/%s", e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char tmp[65536];
        size_t r;
        while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) put(&L->all, tmp, r);
        fclose(f);
        if (L->all.len && L->all.p[L->all.len - 1] != '\n') put(&L->all, "\n", 1);
    }
    closedir(d);
    size_t cap = 1024;
    L->off = malloc(cap * sizeof *L->off);
    L->len = malloc(cap * sizeof *L->len);
    for (size_t i = 0, start = 0; i < L->all.len; i++) {
        if (L->all.p[i] != '\n') continue;
        if (L->n == cap) {
            cap *= 2;
            L->off = realloc(L->off, cap * sizeof *L->off);
            L->len = realloc(L->len, cap * sizeof *L->len);
        }
        L->off[L->n] = start;
        L->len[L->n++] = i + 1 - start;
        start = i + 1;
    }
    return L->n ? 0 : -1;
}

/* A mixed corpus: random corpus lines, interleaved with generated words, numbers, emoji and
 * whitespace runs so that it is not one text repeated. */
static int make_corpus(buf *out, size_t size) {
    static const char *emoji[] = {"😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "🎉", "❤️", "🧑‍💻", "🌍"};
    static const char *ws[] = {" ", "  ", "    ", "\t", "\n", "\r\n", "\n\n", "        ", "   \n",
                               "                ", "\t\t\t", "\n\n\n\n",
                               "                                                                "};
    lines L = {0};
    if (load_lines(&L) < 0) return -1;
    char tmp[64];
    while (out->len < size) {
        uint32_t r = rnd(10);
        if (r < 6) {
            size_t i = rnd((uint32_t)L.n);
            if (L.len[i] > 1000) continue; /* the 5000-space stress line would dominate the mix */
            put(out, L.all.p + L.off[i], L.len[i]);
        } else if (r == 6) {
            int n = snprintf(tmp, sizeof tmp, "%u.%u ", rnd(1000000), rnd(100));
            put(out, tmp, (size_t)n);
        } else if (r == 7) {
            const char *e = emoji[rnd(8)];
            put(out, e, strlen(e));
        } else if (r == 8) {
            const char *w = ws[rnd(13)];
            put(out, w, strlen(w));
        } else { /* a made-up word: letters the BPE has to merge */
            int n = 2 + (int)rnd(10);
            for (int k = 0; k < n; k++) tmp[k] = (char)('a' + rnd(26));
            tmp[n] = ' ';
            put(out, tmp, (size_t)n + 1);
        }
    }
    free(L.all.p);
    free(L.off);
    free(L.len);
    return 0;
}

/* --- measurements ------------------------------------------------------------------------------ */

typedef struct chunk { const char *p; size_t len; } chunk;

static chunk *split_chunks(const char *p, size_t len, size_t size, size_t *n_out) {
    size_t cap = len / size + 2, n = 0;
    chunk *c = malloc(cap * sizeof *c);
    for (size_t at = 0; at < len;) {
        size_t end = at + size < len ? at + size : len;
        while (end < len && p[end - 1] != '\n') end++;
        if (n == cap) c = realloc(c, (cap *= 2) * sizeof *c);
        c[n++] = (chunk){p + at, end - at};
        at = end;
    }
    *n_out = n;
    return c;
}

typedef struct work { const tokenizer *tok; const chunk *c; size_t n; size_t ids; int fail; } work;

static void *encode_all(void *arg) {
    work *w = arg;
    char err[256];
    for (size_t i = 0; i < w->n; i++) {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(w->tok, w->c[i].p, w->c[i].len, 0, &ids, &n, err, sizeof err)) {
            fprintf(stderr, "bench: encode failed: %s\n", err);
            w->fail = 1;
            return NULL;
        }
        w->ids += n;
        free(ids);
    }
    return NULL;
}

int main(int argc, char **argv) {
    char def_tok[4200];
    const char *cache = getenv("LLMR_CACHE"), *home = getenv("HOME");
    if (cache && *cache) snprintf(def_tok, sizeof def_tok, "%s/tokenizer-gptoss/tokenizer.json", cache);
    else snprintf(def_tok, sizeof def_tok, "%s/.cache/llmr/tokenizer-gptoss/tokenizer.json", home ? home : "/tmp");
    const char *tok_path = def_tok, *corpus_path = NULL, *write_path = NULL;
    size_t size = 10u << 20, chunk_size = 100000;
    int rounds = 3, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (!strcmp(argv[i], "--corpus") && i + 1 < argc) corpus_path = argv[++i];
        else if (!strcmp(argv[i], "--write-corpus") && i + 1 < argc) write_path = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk_size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else { fprintf(stderr, "bench: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
    }
    if (chunk_size == 0 || rounds < 1 || size == 0) { fprintf(stderr, "bench: sizes and rounds must be positive\n"); return 2; }

    buf corpus = {0};
    if (corpus_path) {
        FILE *f = fopen(corpus_path, "rb");
        if (!f) { perror(corpus_path); return 1; }
        char tmp[1 << 16];
        size_t r;
        while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) put(&corpus, tmp, r);
        fclose(f);
    } else if (make_corpus(&corpus, size) < 0) {
        fprintf(stderr, "bench: tests/data/tokenizer/*.txt not found (run from the repository root)\n");
        return 1;
    }
    if (write_path) {
        FILE *f = fopen(write_path, "wb");
        if (!f || fwrite(corpus.p, 1, corpus.len, f) != corpus.len || fclose(f) != 0) { perror(write_path); return 1; }
        printf("corpus: %zu bytes written to %s\n", corpus.len, write_path);
        free(corpus.p);
        return 0;
    }

    /* Load: best and worst of three (the first also pays for a cold page cache). */
    tokenizer *tok = NULL;
    double best = 1e9, worst = 0;
    char err[512];
    for (int i = 0; i < 3; i++) {
        tokenizer_destroy(tok);
        double t0 = now_s();
        if (tokenizer_create_from_file(tok_path, &tok, err, sizeof err)) { fprintf(stderr, "bench: %s\n", err); return 1; }
        double ms = (now_s() - t0) * 1e3;
        if (ms < best) best = ms;
        if (ms > worst) worst = ms;
    }
    printf("tokenizer: %s\n", tok_path);
    printf("load_ms: %.1f (best of 3; worst %.1f)\n", best, worst);

    size_t nch;
    chunk *ch = split_chunks(corpus.p, corpus.len, chunk_size, &nch);
    printf("corpus: %zu bytes in %zu chunks of ~%zu bytes\n", corpus.len, nch, chunk_size);
    double mb = corpus.len / 1e6, best_enc = 1e9, best_cpu = 1e9;
    work w = {0};
    for (int r = 0; r < rounds; r++) {
        w = (work){tok, ch, nch, 0, 0};
        double t0 = now_s(), c0 = cpu_s();
        encode_all(&w);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (w.fail) return 1;
        if (dt < best_enc) best_enc = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    printf("ids: %zu (%.2f bytes/id)\n", w.ids, (double)corpus.len / (double)w.ids);
    /* Wall time is the figure to compare; CPU time is printed too because on a shared machine
     * wall time also counts the time other processes held the core. */
    printf("encode_MBps: %.2f (single thread, wall clock, best of %d)\n", mb / best_enc, rounds);
    printf("encode_MBps_cpu: %.2f (same, thread CPU time)\n", mb / best_cpu);

    /* Decode and streaming decode of the whole corpus. */
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(tok, corpus.p, corpus.len, 0, &ids, &n, err, sizeof err)) { fprintf(stderr, "bench: %s\n", err); return 1; }
    double t0 = now_s();
    char *text;
    size_t tl;
    if (tokenizer_decode(tok, ids, n, TOKENIZER_DECODE_LOSSY, &text, &tl, err, sizeof err)) { fprintf(stderr, "bench: %s\n", err); return 1; }
    double dt = now_s() - t0;
    printf("decode_MBps: %.2f (round trip %s)\n", mb / dt, tl == corpus.len && !memcmp(text, corpus.p, tl) ? "exact" : "DIFFERS");
    free(text);
    tokenizer_decoder *d = tokenizer_decoder_create(tok, TOKENIZER_DECODE_LOSSY);
    size_t streamed = 0;
    t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        const char *out;
        size_t ol;
        if (tokenizer_decoder_push(d, ids[i], &out, &ol, err, sizeof err)) { fprintf(stderr, "bench: %s\n", err); return 1; }
        streamed += ol;
    }
    dt = now_s() - t0;
    printf("stream_decode_Mtok_per_s: %.2f (%zu bytes)\n", n / dt / 1e6, streamed);
    tokenizer_decoder_destroy(d);
    free(ids);

    if (threads > 1) {
        pthread_t *th = calloc((size_t)threads, sizeof *th);
        work *ws = calloc((size_t)threads, sizeof *ws);
        t0 = now_s();
        for (int i = 0; i < threads; i++) {
            ws[i] = (work){tok, ch, nch, 0, 0};
            pthread_create(&th[i], NULL, encode_all, &ws[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        dt = now_s() - t0;
        printf("encode_MBps_%d_threads: %.2f (aggregate)\n", threads, mb * threads / dt);
        free(th);
        free(ws);
    }
    free(ch);
    free(corpus.p);
    tokenizer_destroy(tok);
    return 0;
}
