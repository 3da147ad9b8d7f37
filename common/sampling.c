/* sampling.c — see sampling.h. */
#include "common/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct llmr_sampler {
    llmr_sampling_params p;
    int n;               /* vocabulary size */
    uint32_t *counts;    /* [n] times each id was accepted */
    int32_t *seen;       /* distinct accepted ids, in order of first appearance */
    int n_seen;
    uint64_t rng;        /* splitmix64 state */
    int32_t *cand;       /* [n] candidate ids (scratch) */
};

llmr_sampler *llmr_sampler_create(const llmr_sampling_params *p, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    llmr_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    /* copy only what the caller's struct holds; the rest stays "off" (zero) */
    size_t have = p && p->struct_size < sizeof *p ? p->struct_size : sizeof *p;
    if (p) memcpy(&s->p, p, have);
    s->p.struct_size = sizeof s->p;
    s->n = n_vocab;
    s->rng = s->p.seed;
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->seen = malloc((size_t)n_vocab * sizeof *s->seen);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    if (!s->counts || !s->seen || !s->cand) {
        llmr_sampler_destroy(s);
        return NULL;
    }
    return s;
}

void llmr_sampler_destroy(llmr_sampler *s) {
    if (!s) return;
    free(s->counts);
    free(s->seen);
    free(s->cand);
    free(s);
}

void llmr_sampler_accept(llmr_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n) return;
    if (s->counts[token]++ == 0) s->seen[s->n_seen++] = token;
}

int32_t llmr_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i; /* NaN never wins */
    return best;
}

/* NaN as -inf, so it never ranks above a number. */
static float lp_logit(const float *x, int i) { return x[i] == x[i] ? x[i] : -INFINITY; }

/* True when (v, i) ranks after (pv, pi): value descending, then id ascending. */
static int lp_after(float v, int i, float pv, int pi) { return v < pv || (v == pv && i > pi); }

void llmr_logprobs_fill(const float *logits, int n, int32_t token, uint32_t n_top, llmr_token_logprobs *out) {
    memset(out, 0, sizeof *out);
    out->token = token;
    if (n <= 0) { out->logprob = -INFINITY; return; }
    const int32_t top = llmr_argmax(logits, n);
    const float mx = lp_logit(logits, top);
    double z = 0;
    for (int i = 0; i < n && mx > -INFINITY; i++) {
        const float l = lp_logit(logits, i);
        z += l == mx ? 1.0 : exp((double)l - mx); /* == first: an +inf logit minus itself would be NaN */
    }
    /* every logit -inf: a uniform distribution over nothing; report -inf throughout */
    const double lse = mx > -INFINITY ? (double)mx + log(z) : INFINITY;
#define LP_OF(l) ((l) == mx && mx == INFINITY ? 0.0f : (float)((double)(l) - lse))
    out->logprob = token >= 0 && token < n ? LP_OF(lp_logit(logits, token)) : -INFINITY;
    uint32_t k = n_top < LLMR_MAX_TOP_LOGPROBS ? n_top : LLMR_MAX_TOP_LOGPROBS;
    if (k > (uint32_t)n) k = (uint32_t)n;
    /* k passes, each taking the best id that ranks after the previous pick: no scratch, no sort */
    float pv = INFINITY;
    int pi = -1;
    for (uint32_t j = 0; j < k; j++) {
        int bi = -1;
        float bv = -INFINITY;
        for (int i = 0; i < n; i++) {
            const float l = lp_logit(logits, i);
            if (j > 0 && !lp_after(l, i, pv, pi)) continue;
            if (bi < 0 || lp_after(bv, bi, l, i)) { bv = l; bi = i; }
        }
        if (bi < 0) break;
        out->top_ids[j] = bi;
        out->top_logprobs[j] = LP_OF(bv);
        out->n_top = j + 1;
        pv = bv;
        pi = bi;
    }
#undef LP_OF
}

static double next_uniform(llmr_sampler *s) {
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
}

/* Sort order of candidates: probability descending, then id ascending. */
/* qsort has no user pointer: the weights go through a thread-local, so samplers on different threads
 * never share it. */
static _Thread_local const float *tl_weights;
static int cmp_cand(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float wx = tl_weights[x], wy = tl_weights[y];
    if (wx != wy) return wx > wy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Number of buckets of the power-of-two histogram: weights are in (0, 1], exponents 0 .. -149. */
#define NBUCKET 152

/* Gathers, sorted, the fewest most-probable ids that certainly contain the top_k set (need_k > 0)
 * or the top_p nucleus (need_mass > 0, as a fraction of z). Returns the count. */
static int gather_sorted(llmr_sampler *s, const float *w, int need_k, double need_mass, double z) {
    uint32_t count[NBUCKET] = {0};
    double mass[NBUCKET] = {0};
    for (int i = 0; i < s->n; i++) {
        if (!(w[i] > 0)) continue;
        int e;
        frexpf(w[i], &e); /* w = f * 2^e, f in [0.5, 1): e in 1 .. -148 */
        int b = 1 - e;
        if (b < 0) b = 0;
        if (b >= NBUCKET) b = NBUCKET - 1;
        count[b]++;
        mass[b] += w[i];
    }
    /* take whole buckets from the top until the requirement is met */
    uint64_t c = 0;
    double m = 0;
    int last = NBUCKET - 1;
    for (int b = 0; b < NBUCKET; b++) {
        c += count[b];
        m += mass[b];
        if ((need_k > 0 && c >= (uint64_t)need_k) || (need_k <= 0 && m >= need_mass * z)) { last = b; break; }
    }
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if (!(w[i] > 0)) continue;
        int e;
        frexpf(w[i], &e);
        int b = 1 - e;
        if (b < 0) b = 0;
        if (b >= NBUCKET) b = NBUCKET - 1;
        if (b <= last) s->cand[n++] = i;
    }
    tl_weights = w;
    qsort(s->cand, (size_t)n, sizeof *s->cand, cmp_cand);
    return n;
}

int32_t llmr_sampler_sample(llmr_sampler *s, float *x) {
    const llmr_sampling_params *p = &s->p;
    for (int k = 0; k < s->n_seen; k++) {
        int32_t t = s->seen[k];
        x[t] -= (float)s->counts[t] * p->frequency_penalty + p->presence_penalty;
    }
    if (!(p->temperature > 0)) return llmr_argmax(x, s->n);
    int32_t top = llmr_argmax(x, s->n);
    float mx = x[top];
    if (!(mx > -INFINITY)) return top; /* every logit is -inf or NaN */
    /* x becomes the unnormalized probability exp((l - max) / T), in (0, 1] */
    double z = 0;
    for (int i = 0; i < s->n; i++) {
        /* x == mx first: with an +inf logit, inf - inf would be NaN and lose the winner */
        float e = x[i] == mx ? 1.0f : x[i] == x[i] ? expf((x[i] - mx) / p->temperature) : 0.0f;
        x[i] = e;
        z += e;
    }
    int use_k = p->top_k > 0 && p->top_k < s->n;
    int use_p = p->top_p > 0 && p->top_p < 1;
    float min_w = p->min_p > 0 ? p->min_p : 0.0f; /* relative to the top token's weight, which is 1 */
    int n_cand = 0;
    if (use_k || use_p) {
        n_cand = gather_sorted(s, x, use_k ? p->top_k : 0, use_p ? p->top_p : 0, z);
        if (use_k && n_cand > p->top_k) n_cand = p->top_k;
        if (use_p) {
            double zk = z;
            if (use_k) {
                zk = 0;
                for (int j = 0; j < n_cand; j++) zk += x[s->cand[j]];
            }
            double cum = 0;
            for (int j = 0; j < n_cand; j++) {
                cum += x[s->cand[j]];
                if (cum >= p->top_p * zk) { n_cand = j + 1; break; }
            }
        }
        if (n_cand == 0) return top; /* no positive weight survived (cannot happen with finite z) */
        while (n_cand > 1 && x[s->cand[n_cand - 1]] < min_w) n_cand--; /* sorted: min_p cuts the tail */
        double total = 0;
        for (int j = 0; j < n_cand; j++) total += x[s->cand[j]];
        double u = next_uniform(s) * total, cum = 0;
        for (int j = 0; j < n_cand; j++) {
            cum += x[s->cand[j]];
            if (u < cum) return s->cand[j];
        }
        return s->cand[n_cand - 1];
    }
    /* no sorting needed: walk the ids in order */
    double total = 0;
    for (int i = 0; i < s->n; i++)
        if (x[i] >= min_w) total += x[i];
    double u = next_uniform(s) * total, cum = 0;
    int32_t last = top;
    for (int i = 0; i < s->n; i++) {
        if (!(x[i] >= min_w) || !(x[i] > 0)) continue;
        cum += x[i];
        last = i;
        if (u < cum) return i;
    }
    return last;
}
