/* sampling.cu — one token from a logits row, entirely on the GPU (see kernels.h for the steps).
 *
 * A single 1024-thread block: V is ~200k, so each pass is ~200 loads per thread. Thresholds for top_k
 * and top_p are found by bisection on the bit pattern of positive floats (whose integer order equals
 * their value order), 31 passes each, which needs no sort. Each thread owns a contiguous index range,
 * so the final draw walks ids in ascending order: deterministic for a given u. */
#include "engines/gptoss_cuda/kernels.h"

#define SMP_THREADS 1024

__device__ float block_sum(float v, float *red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = red[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (threadIdx.x == 0) red[32] = w;
    }
    __syncthreads();
    return red[32];
}

/* Sum (or count when count_only) of p >= thr over this thread's range, reduced over the block. */
__device__ float mass_at_least(const float *p, int lo, int hi, float thr, int count_only, float *red) {
    float s = 0.0f;
    for (int i = lo; i < hi; i++)
        if (p[i] >= thr) s += count_only ? 1.0f : p[i];
    return block_sum(s, red);
}

/* Largest threshold (as float bits in [lo_bits, 1.0]) whose kept mass/count still reaches target. */
__device__ float bisect_threshold(const float *p, int lo, int hi, float floor_thr, float target, int count_only,
                                  float *red) {
    uint32_t a = __float_as_uint(floor_thr), b = __float_as_uint(1.0f); /* mass(a) >= target holds */
    while (a < b) {
        const uint32_t mid = a + (b - a + 1) / 2;
        if (mass_at_least(p, lo, hi, __uint_as_float(mid), count_only, red) >= target) a = mid;
        else b = mid - 1;
    }
    return __uint_as_float(a);
}

/* One token from one row by one SMP_THREADS block (the steps of kernels.h); shared scratch passed in so
 * the one-row kernel and the batched one (block b = row b) run the very same code. */
static __device__ void sample_row(const float *logits, int V, const int32_t *counts, const gptoss_sample_args &a,
                                  float *p, int32_t *out, float *red, float *fval, int *fidx) {
    const int tid = threadIdx.x;
    const int per = (V + SMP_THREADS - 1) / SMP_THREADS;
    const int lo = min(V, tid * per), hi = min(V, lo + per);

    /* 1-2: penalized logits and their argmax (ties to the lowest id). */
    float best = -INFINITY;
    int bi = -1;
    for (int i = lo; i < hi; i++) {
        float l = logits[i];
        if (l != l) l = -INFINITY; /* NaN never wins */
        if (counts && counts[i] > 0) l -= (float)counts[i] * a.frequency_penalty + a.presence_penalty;
        p[i] = l;
        if (bi < 0 || l > best) { best = l; bi = i; }
    }
    fval[tid] = best;
    fidx[tid] = bi;
    __syncthreads();
    for (int sdist = SMP_THREADS / 2; sdist > 0; sdist >>= 1) {
        if (tid < sdist) {
            const float ov = fval[tid + sdist];
            const int oi = fidx[tid + sdist];
            if (oi >= 0 && (fidx[tid] < 0 || ov > fval[tid] || (ov == fval[tid] && oi < fidx[tid]))) {
                fval[tid] = ov;
                fidx[tid] = oi;
            }
        }
        __syncthreads();
    }
    const float mx = fval[0];
    const int arg = fidx[0];
    if (a.temperature <= 0.0f || !(mx > -INFINITY)) {
        if (tid == 0) *out = arg;
        return;
    }
    /* 3: unnormalized probabilities, the top one is exactly 1. */
    for (int i = lo; i < hi; i++) p[i] = expf((p[i] - mx) / a.temperature);
    __syncthreads();
    float thr = 0.0f;
    /* 4: top_k. */
    if (a.top_k > 0 && a.top_k < V)
        thr = bisect_threshold(p, lo, hi, thr, (float)a.top_k, 1, red);
    /* 5: top_p over what top_k kept. */
    if (a.top_p > 0.0f && a.top_p < 1.0f) {
        const float z = mass_at_least(p, lo, hi, thr, 0, red);
        thr = bisect_threshold(p, lo, hi, thr, a.top_p * z, 0, red);
    }
    /* 6: min_p relative to the top token (p = 1). */
    if (a.min_p > 0.0f && a.min_p > thr) thr = fminf(a.min_p, 1.0f);
    /* 7: the draw, in ascending id order. */
    float mine = 0.0f;
    for (int i = lo; i < hi; i++)
        if (p[i] >= thr) mine += p[i];
    fval[tid] = mine;
    __syncthreads();
    if (tid == 0) {
        float total = 0.0f;
        for (int i = 0; i < SMP_THREADS; i++) total += fval[i];
        const float target = a.u * total;
        float run = 0.0f;
        int chosen = arg; /* fallback: rounding left nothing past target */
        int owner = -1;
        for (int i = 0; i < SMP_THREADS && owner < 0; i++) {
            if (fval[i] > 0.0f && run + fval[i] > target) owner = i;
            else run += fval[i];
        }
        if (owner >= 0) {
            const int olo = min(V, owner * per), ohi = min(V, olo + per);
            for (int i = olo; i < ohi; i++) {
                if (p[i] < thr) continue;
                run += p[i];
                chosen = i;
                if (run > target) break;
            }
        }
        *out = chosen;
    }
}

__global__ void __launch_bounds__(SMP_THREADS) sample_kernel(const float *logits, int V, const int32_t *counts,
                                                             gptoss_sample_args a, float *p, int32_t *out) {
    __shared__ float red[33];
    __shared__ float fval[SMP_THREADS];
    __shared__ int fidx[SMP_THREADS];
    sample_row(logits, V, counts, a, p, out, red, fval, fidx);
}

/* ---- greedy (temperature <= 0): a multi-block argmax, then one block over the blocks' winners.
 * Why: the single block above reads 201k logits with one SM (~0.27 ms per token measured on the H200);
 * spread over ARG_BLOCKS blocks the read takes a few microseconds. Same rules: penalties first, NaN
 * never wins, ties to the lowest id (each stage keeps the lower id on equal values). */
#define ARG_BLOCKS 128
#define ARG_THREADS 512

static __device__ __forceinline__ void arg_merge(float &bv, int &bi, float ov, int oi) {
    if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) { bv = ov; bi = oi; }
}

/* The block's (value, id) winner; every thread gets it. */
static __device__ void block_argmax(float &bv, int &bi, float *sv, int *si) {
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        arg_merge(bv, bi, ov, oi);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    bv = -INFINITY;
    bi = -1;
    for (int w = 0; w < nw; w++) arg_merge(bv, bi, sv[w], si[w]);
}

__global__ void __launch_bounds__(ARG_THREADS) argmax_part_kernel(const float *logits, int V, const int32_t *counts,
                                                                  float fp, float pp, float *part_v, int *part_i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    float bv = -INFINITY;
    int bi = -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < V; i += gridDim.x * blockDim.x) {
        float l = logits[i];
        if (l != l) l = -INFINITY; /* NaN never wins */
        if (counts && counts[i] > 0) l -= (float)counts[i] * fp + pp;
        arg_merge(bv, bi, l, i);
    }
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) { part_v[blockIdx.x] = bv; part_i[blockIdx.x] = bi; }
}

__global__ void __launch_bounds__(ARG_BLOCKS) argmax_final_kernel(const float *part_v, const int *part_i, int32_t *out) {
    __shared__ float sv[32];
    __shared__ int si[32];
    float bv = part_v[threadIdx.x];
    int bi = part_i[threadIdx.x];
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) *out = bi;
}

static int g_fast_greedy = 1;
void gptoss_sample_use_fast_greedy(int on) { g_fast_greedy = on != 0; }

cudaError_t gptoss_sample(const float *logits, int V, const int32_t *counts, gptoss_sample_args a, float *work,
                          int32_t *out, cudaStream_t s) {
    if (V <= 0) return cudaErrorInvalidValue;
    if (a.temperature <= 0.0f && g_fast_greedy && V >= 2 * ARG_BLOCKS) {
        float *pv = work;
        int *pi = (int *)(work + ARG_BLOCKS);
        argmax_part_kernel<<<ARG_BLOCKS, ARG_THREADS, 0, s>>>(logits, V, counts, a.frequency_penalty, a.presence_penalty,
                                                                pv, pi);
        argmax_final_kernel<<<1, ARG_BLOCKS, 0, s>>>(pv, pi, out);
        return cudaGetLastError();
    }
    sample_kernel<<<1, SMP_THREADS, 0, s>>>(logits, V, counts, a, work, out);
    return cudaGetLastError();
}

__global__ void count_token_kernel(int32_t *counts, const int32_t *token) { counts[*token] += 1; }

cudaError_t gptoss_count_token(int32_t *counts, const int32_t *token, cudaStream_t s) {
    count_token_kernel<<<1, 1, 0, s>>>(counts, token);
    return cudaGetLastError();
}

/* ---- all rows of a batched step in three launches (kernels.h gptoss_sample_rows).
 * Greedy rows: argmax_part over a (blocks, rows) grid, then the row's block merges the parts (the
 * argmax is unique under "NaN never wins, ties to the lowest id", so the partition does not change
 * it). Other rows: their block runs sample_row, the one-row kernel's code, on V floats of work of
 * their own. Then one thread per row counts its token where the row has penalties. */
__global__ void __launch_bounds__(ARG_THREADS) rows_argmax_part_kernel(const gptoss_sample_row *rows, int V, int nb,
                                                                       float *part_v, int *part_i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const gptoss_sample_row r = rows[blockIdx.y];
    if (r.a.temperature > 0.0f) return; /* uniform per block */
    float bv = -INFINITY;
    int bi = -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < V; i += nb * blockDim.x) {
        float l = r.logits[i];
        if (l != l) l = -INFINITY;
        if (r.counts && r.counts[i] > 0) l -= (float)r.counts[i] * r.a.frequency_penalty + r.a.presence_penalty;
        arg_merge(bv, bi, l, i);
    }
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) { part_v[blockIdx.y * nb + blockIdx.x] = bv; part_i[blockIdx.y * nb + blockIdx.x] = bi; }
}

__global__ void __launch_bounds__(SMP_THREADS) rows_sample_kernel(const gptoss_sample_row *rows, int V, int nb,
                                                                  const float *part_v, const int *part_i, float *work,
                                                                  int32_t *out) {
    __shared__ float red[33];
    __shared__ float fval[SMP_THREADS];
    __shared__ int fidx[SMP_THREADS];
    const int b = blockIdx.x;
    const gptoss_sample_row r = rows[b];
    if (r.a.temperature > 0.0f) {
        sample_row(r.logits, V, r.counts, r.a, work + (size_t)b * V, out + b, red, fval, fidx);
        return;
    }
    if (threadIdx.x >= 32) return; /* one warp merges the row's nb parts in block order */
    float bv = -INFINITY;
    int bi = -1;
    for (int k = threadIdx.x; k < nb; k += 32) arg_merge(bv, bi, part_v[b * nb + k], part_i[b * nb + k]);
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        arg_merge(bv, bi, ov, oi);
    }
    if (threadIdx.x == 0) out[b] = bi;
}

__global__ void rows_count_kernel(const gptoss_sample_row *rows, int B, const int32_t *tok) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B && rows[b].counts && rows[b].count_token) rows[b].counts[tok[b]] += 1;
}

size_t gptoss_sample_rows_work(int B, int V) { return (size_t)B * V + 2 * (size_t)B * ARG_BLOCKS; }

cudaError_t gptoss_sample_rows(const gptoss_sample_row *rows, int B, int V, float *work, int32_t *out, cudaStream_t s) {
    if (B <= 0) return cudaSuccess;
    if (V <= 0 || !rows || !work || !out) return cudaErrorInvalidValue;
    /* enough argmax blocks per greedy row to spread its read over the SMs, at least 4 */
    int nb = ARG_BLOCKS / B;
    if (nb < 4) nb = 4;
    float *part_v = work + (size_t)B * V;
    int *part_i = (int *)(part_v + (size_t)B * ARG_BLOCKS);
    rows_argmax_part_kernel<<<dim3((unsigned)nb, (unsigned)B), ARG_THREADS, 0, s>>>(rows, V, nb, part_v, part_i);
    rows_sample_kernel<<<(unsigned)B, SMP_THREADS, 0, s>>>(rows, V, nb, part_v, part_i, work, out);
    rows_count_kernel<<<(unsigned)((B + 127) / 128), 128, 0, s>>>(rows, B, out);
    return cudaGetLastError();
}

/* ---- log-probabilities of the sampled tokens (kernels.h gptoss_logprobs_rows)
 * One pass over the row: each thread keeps its running max and its sum of exp(l - max) (rescaled when the max
 * grows), and its LP_CAND best ids in order; the block merges the sums into the log-sum-exp. Then each alternative is
 * the block's best among the threads' first candidates; the thread that supplied it moves to its next, and scans its
 * slice again only when its LP_CAND are used up (rare: 20 picks over 1,024 threads). The session-21 first form (three
 * passes, a rescan after every pick) took 0.254 / 1.456 ms at 64 rows for the token alone / 20 alternatives. */

#define LP_CAND 4

static __device__ __forceinline__ float lp_logit(const float *x, int i) {
    const float l = x[i];
    return l == l ? l : -INFINITY; /* NaN ranks below every number */
}

/* log p of a logit l, given the row's max mx and log-sum-exp lse (an +inf max takes all the mass). */
static __device__ __forceinline__ float lp_of(float l, float mx, float lse) {
    if (mx == INFINITY) return l == INFINITY ? 0.0f : -INFINITY;
    return l - lse;
}

/* True when (v, i) ranks before (w, j): value descending, then id ascending. */
static __device__ __forceinline__ bool lp_before(float v, int i, float w, int j) { return v > w || (v == w && i < j); }

/* Inserts (v, i) into the sorted candidates cv / ci (ci < 0: an empty slot, all at the end) when it ranks among the
 * first LP_CAND: it moves down the list, each slot keeping whichever of the two ranks first. */
static __device__ __forceinline__ void lp_insert(float cv[LP_CAND], int ci[LP_CAND], float v, int i) {
    if (ci[LP_CAND - 1] >= 0 && !lp_before(v, i, cv[LP_CAND - 1], ci[LP_CAND - 1])) return;
#pragma unroll
    for (int k = 0; k < LP_CAND; k++)
        if (i >= 0 && (ci[k] < 0 || lp_before(v, i, cv[k], ci[k]))) {
            const float tv = cv[k];
            const int ti = ci[k];
            cv[k] = v;
            ci[k] = i;
            v = tv;
            i = ti;
        }
}

/* Drops the first candidate. */
static __device__ __forceinline__ void lp_pop(float cv[LP_CAND], int ci[LP_CAND]) {
#pragma unroll
    for (int k = 0; k + 1 < LP_CAND; k++) { cv[k] = cv[k + 1]; ci[k] = ci[k + 1]; }
    cv[LP_CAND - 1] = -INFINITY;
    ci[LP_CAND - 1] = -1;
}

/* This thread's candidates among ids tid, tid + n, ... that rank after (pv, pi). */
static __device__ void lp_refill(const float *x, int V, float pv, int pi, float cv[LP_CAND], int ci[LP_CAND]) {
#pragma unroll
    for (int k = 0; k < LP_CAND; k++) { cv[k] = -INFINITY; ci[k] = -1; }
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const float l = lp_logit(x, i);
        if (lp_before(l, i, pv, pi) || (l == pv && i == pi)) continue; /* ranks before or is the previous pick */
        lp_insert(cv, ci, l, i);
    }
}

__global__ void __launch_bounds__(SMP_THREADS) logprobs_rows_kernel(const gptoss_logprob_row *rows, int V,
                                                                    const int32_t *tok, llmr_token_logprobs *out) {
    __shared__ float sv[32], red[33];
    __shared__ int si[32];
    const gptoss_logprob_row r = rows[blockIdx.x];
    if (!r.logits) return; /* uniform per block */
    llmr_token_logprobs *o = out + blockIdx.x;
    const int n_top = min(min(r.n_top, LLMR_MAX_TOP_LOGPROBS), V);
    /* one pass: running max m and sum s of exp(l - m); the candidates only where alternatives are asked */
    float m = -INFINITY, z = 0.0f;
    float cv[LP_CAND];
    int ci[LP_CAND];
#pragma unroll
    for (int k = 0; k < LP_CAND; k++) { cv[k] = -INFINITY; ci[k] = -1; }
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const float l = lp_logit(r.logits, i);
        if (n_top > 0) lp_insert(cv, ci, l, i);
        if (l == -INFINITY) continue;
        if (l > m) { z = z * expf(m - l) + 1.0f; m = l; } /* m = -inf: z is 0, and 0 * exp(-inf) = 0 */
        else z += expf(l - m);
    }
    /* the row's max, then the sum rescaled to it */
    float bv = m;
    int bi = m > -INFINITY ? 0 : -1; /* the id does not matter here, only that the value counts */
    block_argmax(bv, bi, sv, si);
    const float mx = bv;
    const float part = mx == INFINITY || m == -INFINITY ? 0.0f : z * expf(m - mx);
    z = block_sum(part, red);
    const float lse = mx > -INFINITY ? mx + logf(z) : INFINITY; /* all -inf: every log p is -inf */
    if (threadIdx.x == 0) {
        const int t = tok[blockIdx.x];
        o->token = t;
        o->logprob = t >= 0 && t < V ? lp_of(lp_logit(r.logits, t), mx, lse) : -INFINITY;
        o->n_top = (uint32_t)max(n_top, 0);
    }
    for (int j = 0; j < n_top; j++) {
        __syncthreads(); /* sv / si of the previous reduction are read */
        float wv = cv[0];
        int wi = ci[0];
        block_argmax(wv, wi, sv, si);
        if (wi < 0) break; /* uniform: every thread sees the same winner */
        if (threadIdx.x == 0) {
            o->top_ids[j] = wi;
            o->top_logprobs[j] = lp_of(wv, mx, lse);
        }
        if (ci[0] == wi) {
            lp_pop(cv, ci);
            if (ci[0] < 0 && j + 1 < n_top) lp_refill(r.logits, V, wv, wi, cv, ci); /* used up: the next ones */
        }
    }
}

cudaError_t gptoss_logprobs_rows(const gptoss_logprob_row *rows, int B, int V, const int32_t *tok,
                                 llmr_token_logprobs *out, cudaStream_t s) {
    if (B <= 0) return cudaSuccess;
    if (V <= 0 || !rows || !tok || !out) return cudaErrorInvalidValue;
    logprobs_rows_kernel<<<(unsigned)B, SMP_THREADS, 0, s>>>(rows, V, tok, out);
    return cudaGetLastError();
}
