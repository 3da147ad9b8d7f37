/* gptoss/ref_math.c — see ref_math.h. Plain loops in fp32 (norm sums in double); dot products keep eight
 * partial sums, so their rounding error stays ~1e-7 relative, far below the 1e-4 parity budget. */
#include "common/gptoss/ref_math.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "common/gptoss/config.h"

void gptoss_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* Four-lane float vectors (GCC/clang vector extension; plain SSE on x86-64, NEON on arm64): the
 * attention loops are the hot spot of long prompts and the compiler does not vectorize them at -O2. */
typedef float v4f __attribute__((vector_size(16)));
static inline v4f load4(const float *p) { v4f v; memcpy(&v, p, sizeof v); return v; }
static inline void store4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* fp32 dot product with eight partial sums. */
static float dot_f32(const float *a, const float *b, int n) {
    v4f s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += load4(a + i) * load4(b + i);
        s1 += load4(a + i + 4) * load4(b + i + 4);
    }
    v4f s = s0 + s1;
    float r = (s[0] + s[1]) + (s[2] + s[3]);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* o[0..d) += p * v[0..d) */
static void axpy_f32(float *o, float p, const float *v, int d) {
    int i = 0;
    for (; i + 4 <= d; i += 4) store4(o + i, load4(o + i) + p * load4(v + i));
    for (; i < d; i++) o[i] += p * v[i];
}

typedef struct matvec_part {
    float *out;
    const float *W, *b, *x;
    int r0, r1, cols;
} matvec_part;

static void *matvec_rows(void *arg) {
    matvec_part *p = arg;
    for (int r = p->r0; r < p->r1; r++) p->out[r] = dot_f32(p->W + (size_t)r * (size_t)p->cols, p->x, p->cols) + (p->b ? p->b[r] : 0.0f);
    return NULL;
}

void gptoss_matvec(float *out, const float *W, const float *b, const float *x, int rows, int cols, int threads) {
    enum { MAX_THREADS = 64 };
    /* Threads pay off only for big matrices (the 201088-row lm_head); spawning costs ~20 us. */
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || (size_t)rows * (size_t)cols < (1u << 20)) {
        matvec_part p = {out, W, b, x, 0, rows, cols};
        matvec_rows(&p);
        return;
    }
    pthread_t tid[MAX_THREADS];
    matvec_part parts[MAX_THREADS];
    int spawned[MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        parts[t] = (matvec_part){out, W, b, x, (int)((long)rows * t / threads), (int)((long)rows * (t + 1) / threads), cols};
        if (t > 0) spawned[t] = pthread_create(&tid[t], NULL, matvec_rows, &parts[t]) == 0;
    }
    matvec_rows(&parts[0]);
    for (int t = 1; t < threads; t++) {
        if (spawned[t]) pthread_join(tid[t], NULL);
        else matvec_rows(&parts[t]); /* could not spawn: do its rows here */
    }
}

void gptoss_rope(float *x, int d, int pos, const float *inv_freq, float attn_factor) {
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i]; /* fp32 product, as transformers computes it */
        float c = cosf(angle) * attn_factor, s = sinf(angle) * attn_factor;
        float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
    }
}

void gptoss_attend_group(float *out, const float *q, int nq, const float *K, const float *V, int n, int first, int d,
                         size_t stride, float scale, const float *sinks, float *scores, float *sink_mass) {
    const int m = n - first;
    /* scores[h, j] = q_h . k_j * scale: each key row is read once for all the heads of the group */
    for (int j = 0; j < m; j++) {
        const float *k = K + (size_t)(first + j) * stride;
        for (int h = 0; h < nq; h++) scores[(size_t)h * m + j] = dot_f32(q + (size_t)h * d, k, d) * scale;
    }
    /* softmax with the sink in the denominator (and in the max, as transformers' eager path does) */
    for (int h = 0; h < nq; h++) {
        float *sc = scores + (size_t)h * m, mx = sinks[h];
        for (int j = 0; j < m; j++)
            if (sc[j] > mx) mx = sc[j];
        double denom = expf(sinks[h] - mx);
        for (int j = 0; j < m; j++) {
            sc[j] = expf(sc[j] - mx);
            denom += sc[j];
        }
        float inv = (float)(1.0 / denom);
        for (int j = 0; j < m; j++) sc[j] *= inv;
        if (sink_mass) sink_mass[h] = expf(sinks[h] - mx) * inv;
    }
    /* out_h = sum_j p_hj v_j */
    memset(out, 0, (size_t)nq * (size_t)d * sizeof *out);
    for (int j = 0; j < m; j++) {
        const float *v = V + (size_t)(first + j) * stride;
        for (int h = 0; h < nq; h++) axpy_f32(out + (size_t)h * d, scores[(size_t)h * m + j], v, d);
    }
}

float gptoss_attend_head(float *out, const float *q, const float *K, const float *V, int n, int first, int d,
                         size_t stride, float scale, float sink, float *scores) {
    float mass;
    gptoss_attend_group(out, q, 1, K, V, n, first, d, stride, scale, &sink, scores, &mass);
    return mass;
}

void gptoss_route_topk(const float *logits, int n, int k, int *idx, float *w) {
    unsigned char taken[256];
    memset(taken, 0, sizeof taken);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++)
            if (!taken[e] && (best < 0 || logits[e] > logits[best])) best = e; /* strict >: ties to lower index */
        taken[best] = 1;
        idx[j] = best;
    }
    double mx = logits[idx[0]], sum = 0, ex[256];
    for (int j = 0; j < k; j++) sum += ex[j] = exp((double)logits[idx[j]] - mx);
    for (int j = 0; j < k; j++) w[j] = (float)(ex[j] / sum);
}

void gptoss_swiglu(float *out, const float *gu, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        float g = gu[2 * i], u = gu[2 * i + 1];
        if (g > limit) g = limit;
        if (u > limit) u = limit;
        if (u < -limit) u = -limit;
        float glu = g / (1.0f + expf(-alpha * g)); /* g * sigmoid(alpha * g) */
        out[i] = glu * (u + 1.0f);
    }
}

void gptoss_mxfp4_dequant(float *out, const uint8_t *blocks, const uint8_t *scales, int rows, int cols) {
    int nb = cols / GPTOSS_MXFP4_BLOCK;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < nb; g++) {
            float scale = ldexpf(1.0f, (int)scales[(size_t)r * nb + g] - 127);
            const uint8_t *b = blocks + ((size_t)r * nb + g) * 16;
            float *o = out + (size_t)r * cols + (size_t)g * GPTOSS_MXFP4_BLOCK;
            for (int j = 0; j < 16; j++) {
                o[2 * j] = gptoss_fp4_value(b[j] & 15) * scale;
                o[2 * j + 1] = gptoss_fp4_value(b[j] >> 4) * scale;
            }
        }
}
