/* sampling.cu — one token from a logits row, entirely on the GPU (see kernels.h for the steps).
 *
 * Two forms of the non-greedy steps (gptoss_sample_use_radix; the greedy argmax is the same in both):
 *  - the one-block sampler (LLMR_GPTOSS_SAMPLER=0): a single 1024-thread block, V is ~200k, so each pass is ~200
 *    loads per thread. Thresholds for top_k and top_p are found by bisection on the bit pattern of positive floats
 *    (whose integer order equals their value order), 31 passes each, which needs no sort. Each thread owns a
 *    contiguous index range, so the final draw walks ids in ascending order. One SM does all of it: 0.59 ms a token
 *    at temperature 1, 1.77 ms with top_p or top_k (H100, 20b vocabulary; greedy takes 0.02 ms);
 *  - the multi-block sampler (default, below "radix select"): every step spread over many blocks a row, the
 *    thresholds by a three-digit radix select over the same bit patterns, the masses as exact 64-bit integers.
 * Both deterministic for a given u. */
#include "engines/gptoss_cuda/kernels.h"

#define SMP_THREADS 1024

/* Block sum of v (float, or 64-bit integers for the radix sampler's exact masses); every thread gets it. red: 33 words
 * of shared scratch (synced here). Blocks of whole warps; a block of fewer than 32 warps adds zeros for the rest. */
template <class T>
static __device__ T block_sum(T v, T *red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        T w = (int)threadIdx.x < (int)(blockDim.x >> 5) ? red[threadIdx.x] : T(0);
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (threadIdx.x == 0) red[32] = w;
    }
    __syncthreads();
    return red[32];
}

/* The penalized logit of id i, NaN as -inf (kernels.h steps 1-2): every form of the sampler reads logits through it. */
static __device__ __forceinline__ float penalized_logit(const float *logits, const int32_t *counts, float fp, float pp,
                                                        int i) {
    float l = logits[i];
    if (l != l) l = -INFINITY; /* NaN never wins */
    if (counts && counts[i] > 0) l -= (float)counts[i] * fp + pp;
    return l;
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
        const float l = penalized_logit(logits, counts, a.frequency_penalty, a.presence_penalty, i);
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

/* One warp: the argmax of a row's nb block parts (pv, pi), merged in block order; lane 0 gets it. */
static __device__ __forceinline__ int warp_merge_parts(const float *pv, const int *pi, int nb, int lane) {
    float bv = -INFINITY;
    int bi = -1;
    for (int k = lane; k < nb; k += 32) arg_merge(bv, bi, pv[k], pi[k]);
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        arg_merge(bv, bi, ov, oi);
    }
    return bi;
}

/* The block's part of the argmax (its ids i = block + k grid threads), written by thread 0 to part_v / part_i. */
static __device__ __forceinline__ void argmax_part(const float *logits, int V, const int32_t *counts, float fp, float pp,
                                                   float *part_v, int *part_i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    float bv = -INFINITY;
    int bi = -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < V; i += gridDim.x * blockDim.x) {
        arg_merge(bv, bi, penalized_logit(logits, counts, fp, pp, i), i);
    }
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) { part_v[blockIdx.x] = bv; part_i[blockIdx.x] = bi; }
}

__global__ void __launch_bounds__(ARG_THREADS) argmax_part_kernel(const float *logits, int V, const int32_t *counts,
                                                                  float fp, float pp, float *part_v, int *part_i) {
    argmax_part(logits, V, counts, fp, pp, part_v, part_i);
}

__global__ void __launch_bounds__(ARG_BLOCKS) argmax_final_kernel(const float *part_v, const int *part_i, int32_t *out) {
    __shared__ float sv[32];
    __shared__ int si[32];
    float bv = part_v[threadIdx.x];
    int bi = part_i[threadIdx.x];
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) *out = bi;
}

/* The greedy argmax in one launch: argmax_part_kernel's blocks, then the last block to finish (a counter, left at 0)
 * merges the parts in block order, as argmax_final_kernel, and writes the id to out and, where given, to out_host
 * (the device's view of pinned host memory: the host then reads it after the stream's event, no copy launched). */
__global__ void __launch_bounds__(ARG_THREADS) argmax_one_kernel(const float *logits, int V, const int32_t *counts,
                                                                 float fp, float pp, float *part_v, int *part_i,
                                                                 int32_t *ctr, int32_t *out, int32_t *out_host) {
    __shared__ int last;
    argmax_part(logits, V, counts, fp, pp, part_v, part_i);
    if (threadIdx.x == 0) { /* the thread that wrote the part */
        __threadfence();
        last = atomicAdd(ctr, 1) == (int)gridDim.x - 1;
        if (last) __threadfence();
    }
    __syncthreads();
    if (!last || threadIdx.x >= 32) return;
    const int id = warp_merge_parts(part_v, part_i, gridDim.x, threadIdx.x); /* the parts in block order */
    if (threadIdx.x == 0) {
        *out = id;
        if (out_host) *out_host = id;
        *ctr = 0;
    }
}

static int g_fast_greedy = 1, g_radix = 1;
void gptoss_sample_use_fast_greedy(int on) { g_fast_greedy = on != 0; }
/* Whether a row takes the multi-block greedy argmax (gptoss_sample's parts and merge, gptoss_sample_host's one launch). */
static bool multiblock_greedy(const gptoss_sample_args &a, int V) {
    return a.temperature <= 0.0f && g_fast_greedy && V >= 2 * ARG_BLOCKS;
}
void gptoss_sample_use_radix(int on) { g_radix = on != 0; }

/* ---- radix select: the non-greedy steps over many blocks a row (gptoss_sample_use_radix, the default).
 *
 * Why: the one-block kernel above spends 0.6-1.8 ms a token on one SM (its 31-pass bisections, each a pass over
 * 201k values), a quarter to half of a batch-1 decode step. Here each row's V values are split over nb blocks and
 * every step is a launch over all rows' blocks:
 *   max      the row's max and argmax of the penalized logits (block parts, merged by each later launch);
 *   select   top_k, then top_p: three launches each, one per 10-bit digit of p's bit pattern (p <= 1.0, so bits
 *            29..0 carry it): each launch first finishes the previous digit from its histogram (every block of the
 *            row the same way, so no launch of its own), then counts and weighs, in 1,024 bins of the next digit,
 *            the values that match the digits chosen so far;
 *   mass     each block's kept mass;
 *   draw     the block whose range holds u * total finds the id in it.
 * Masses are sums of p * 2^40 as 64-bit integers, so every sum is exact whatever the order: the thresholds and the
 * draw depend on neither the block count nor the batch (a lone row and a batched one give the same id), and the
 * semantics are kernels.h's steps with exact sums where the one-block kernel rounds in fp32. A row's launches chain
 * through its state record (written by its block 0) and three histogram buffers: launch j finishes from buffer
 * (j - 1) % 3, fills j % 3 and clears (j + 1) % 3 for the next. */
#define RS_THREADS 512
#define RS_BINS 1024 /* 10-bit digits */
#define RS_DIGITS 3
#define RS_MAX_NB 128 /* blocks a row at most */
#define RS_FX 1099511627776.0f /* 2^40: p as a 64-bit integer (p <= 1, so the sums stay below 2^58 for any V < 2^18) */

enum { RS_MAX = 0, RS_TOPK, RS_TOPP, RS_MASS, RS_DRAW };

/* A row's state between launches (block 0 writes it, the next launch reads it). pend: the select whose histogram the
 * previous launch filled (0 none, RS_TOPK or RS_TOPP) and its digit. */
struct rs_state {
    float mx;
    int arg;
    int pend, digit;
    uint32_t prefix;          /* the current select's digits chosen so far */
    uint32_t lo;              /* bit pattern below which a value is out (the top_k threshold once it is known) */
    uint32_t thr;             /* the threshold the selects gave (bits), 0 before */
    uint32_t pad;
    unsigned long long above_n, above_m; /* count and mass of the values above the chosen digits */
    unsigned long long target;           /* what the current select must reach (count for top_k, mass for top_p) */
};

/* A row's scratch in its work region (gptoss_sample_work floats): three histograms, two states, the max parts and the
 * blocks' kept masses. */
struct rs_hist {
    uint32_t n[RS_BINS];
    unsigned long long m[RS_BINS];
};
struct rs_scratch {
    rs_hist h[3];
    rs_state st[2];
    float pv[RS_MAX_NB];
    int pi[RS_MAX_NB];
    unsigned long long bm[RS_MAX_NB];
};
static_assert(sizeof(rs_scratch) % 16 == 0, "rs_scratch keeps the next row's region aligned");
#define RS_ROW_FLOATS ((int)(sizeof(rs_scratch) / sizeof(float)))

/* whole 16-byte units, so every row's region (b times this) keeps the 64-bit sums aligned whatever V is */
size_t gptoss_sample_work(int V) { return ((size_t)(V > RS_ROW_FLOATS ? V : RS_ROW_FLOATS) + 3) & ~(size_t)3; }

/* Where the rows come from: one row by value (gptoss_sample) or a device array (gptoss_sample_rows). */
struct rs_one {
    gptoss_sample_row r;
    __device__ gptoss_sample_row get(int) const { return r; }
};
struct rs_many {
    const gptoss_sample_row *rows;
    __device__ gptoss_sample_row get(int b) const { return rows[b]; }
};

/* The penalized logit of id i of a row. */
static __device__ __forceinline__ float rs_logit(const gptoss_sample_row &r, int i) {
    return penalized_logit(r.logits, r.counts, r.a.frequency_penalty, r.a.presence_penalty, i);
}

/* p of id i and its bit pattern (sample_row's expression: the same float for the same logit). */
static __device__ __forceinline__ float rs_p(const gptoss_sample_row &r, int i, float mx) {
    return expf((rs_logit(r, i) - mx) / r.a.temperature);
}

static __device__ __forceinline__ unsigned long long rs_fx(float p) { return (unsigned long long)(p * RS_FX); }

/* Exclusive prefix of v over the block's threads in thread order; *total gets the block's sum. red: 32 words. */
static __device__ unsigned long long rs_block_excl(unsigned long long v, unsigned long long *red, unsigned long long *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long y = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += y;
    }
    __syncthreads();
    if (lane == 31) red[warp] = inc;
    __syncthreads();
    unsigned long long before = 0, all = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
        if (w < warp) before += red[w];
        all += red[w];
    }
    *total = all;
    return before + inc - v;
}

/* The digit of a select from its histogram (in shared memory): the largest bin b whose values together with those
 * above reach the target, i.e. above + sum over bins >= b of val >= target. Updates the state: the values in bins
 * above b join `above`, b joins the prefix; after the last digit the threshold is the prefix. Every thread of the
 * block gets the same state. by_mass: weigh the bins by mass (top_p) or count them (top_k). */
static __device__ void rs_finish_digit(rs_state &st, const uint32_t *hn, const unsigned long long *hm, bool by_mass,
                                       unsigned long long *red, int *sel) {
    /* thread t holds bins 2t and 2t + 1 (RS_BINS = 2 RS_THREADS); suffix sums from the top bin down: the exclusive
     * prefix in reversed order */
    const int t = threadIdx.x, b0 = RS_BINS - 1 - 2 * t, b1 = b0 - 1; /* the thread's two bins, high first */
    const unsigned long long v0 = by_mass ? hm[b0] : hn[b0], v1 = by_mass ? hm[b1] : hn[b1];
    unsigned long long all;
    const unsigned long long above0 = rs_block_excl(v0 + v1, red, &all); /* sum of bins above b0 */
    if (t == 0) *sel = -1;
    __syncthreads();
    const unsigned long long base = by_mass ? st.above_m : st.above_n, need = st.target;
    if (base + above0 + v0 >= need && base + above0 < need) *sel = b0;
    else if (base + above0 + v0 < need && base + above0 + v0 + v1 >= need) *sel = b1;
    __syncthreads();
    int b = *sel;
    if (b < 0) b = 0; /* cannot happen (the target is within the values' total); keep every value */
    /* the bins above b: counts and masses into `above` (both, so the next select and the draw can use them) */
    unsigned long long n_up = 0, m_up = 0;
    if (b0 > b) { n_up += hn[b0]; m_up += hm[b0]; }
    if (b1 > b) { n_up += hn[b1]; m_up += hm[b1]; }
    n_up = block_sum(n_up, red);
    m_up = block_sum(m_up, red);
    st.above_n += n_up;
    st.above_m += m_up;
    st.prefix = (st.prefix << 10) | (uint32_t)b;
}

/* The row's state at the start of launch j (stage `stage`, digit d for the selects): launch 1 builds it from the max
 * parts; later ones take the previous launch's and finish its pending digit from its histogram. Then the stage's own
 * set-up. Every thread of the block returns the same state. */
static __device__ rs_state rs_enter(const gptoss_sample_row &r, rs_scratch *sc, int j, int stage, int d, int nb,
                                    rs_hist *sh, unsigned long long *red, int *sel, float *fv, int *fi) {
    rs_state st;
    if (j == 1) {
        float bv = -INFINITY;
        int bi = -1;
        for (int k = threadIdx.x; k < nb; k += blockDim.x) arg_merge(bv, bi, sc->pv[k], sc->pi[k]);
        block_argmax(bv, bi, fv, fi);
        memset(&st, 0, sizeof st);
        st.mx = bv;
        st.arg = bi;
    } else {
        st = sc->st[(j - 1) & 1];
        if (st.pend) {
            const rs_hist *h = &sc->h[(j - 1) % 3];
            for (int k = threadIdx.x; k < RS_BINS; k += blockDim.x) { sh->n[k] = h->n[k]; sh->m[k] = h->m[k]; }
            __syncthreads();
            const bool topp = st.pend == RS_TOPP;
            if (topp && st.digit == 0) { /* the kept mass is known now: the target is top_p of it */
                unsigned long long z = 0;
                for (int k = threadIdx.x; k < RS_BINS; k += blockDim.x) z += sh->m[k];
                z = block_sum(z, red);
                st.target = (unsigned long long)((double)r.a.top_p * (double)z);
                if (st.target < 1) st.target = 1; /* a top_p so small it rounds to nothing keeps the top value(s) */
            }
            rs_finish_digit(st, sh->n, sh->m, topp, red, sel);
            if (st.digit == RS_DIGITS - 1) { /* the select is done: its threshold */
                st.thr = st.prefix;
                if (st.pend == RS_TOPK) st.lo = st.thr; /* top_p looks only at what top_k kept */
            }
            st.pend = 0;
            __syncthreads();
        }
    }
    const bool topk = r.a.top_k > 0, topp = r.a.top_p > 0.0f && r.a.top_p < 1.0f;
    if ((stage == RS_TOPK && topk) || (stage == RS_TOPP && topp)) {
        if (d == 0) { /* a new select */
            st.prefix = 0;
            st.above_n = st.above_m = 0;
            st.target = stage == RS_TOPK ? (unsigned long long)r.a.top_k : 0; /* top_p's once its first histogram is in */
        }
        st.pend = stage;
        st.digit = d;
    }
    return st;
}

/* Launch j of a sampling: stage RS_MAX, RS_TOPK / RS_TOPP digit d, RS_MASS or RS_DRAW, for every non-greedy row
 * (blockIdx.y) over its nb blocks (blockIdx.x: ids [x V / nb, (x + 1) V / nb)). Greedy rows take part in RS_MAX (their
 * argmax) and RS_DRAW (the merge) only. */
template <class ROWS>
__global__ void __launch_bounds__(RS_THREADS) rs_kernel(ROWS rows, int V, int nb, float *work, size_t wrow, int j,
                                                        int stage, int d, int32_t *out) {
    __shared__ rs_hist sh;
    __shared__ unsigned long long red[33];
    __shared__ float fv[32];
    __shared__ int fi[32], sel;
    const int b = blockIdx.y, x = blockIdx.x, tid = threadIdx.x;
    const gptoss_sample_row r = rows.get(b);
    rs_scratch *sc = (rs_scratch *)(work + (size_t)b * wrow);
    const int i0 = (int)((long long)x * V / nb), i1 = (int)((long long)(x + 1) * V / nb);
    const bool greedy = !(r.a.temperature > 0.0f);
    if (stage == RS_MAX) { /* the block's max and argmax; the histograms cleared for launches 1 and 2 */
        float bv = -INFINITY;
        int bi = -1;
        for (int i = i0 + tid; i < i1; i += blockDim.x) arg_merge(bv, bi, rs_logit(r, i), i);
        block_argmax(bv, bi, fv, fi);
        if (tid == 0) { sc->pv[x] = bv; sc->pi[x] = bi; }
        if (!greedy)
            for (int k = x * blockDim.x + tid; k < 2 * RS_BINS; k += nb * blockDim.x) {
                rs_hist *h = &sc->h[1 + k / RS_BINS];
                h->n[k % RS_BINS] = 0;
                h->m[k % RS_BINS] = 0;
            }
        return;
    }
    if (greedy) { /* the merge of the parts, as rows_sample_kernel's */
        if (stage != RS_DRAW || x != 0 || tid >= 32) return;
        const int bi = warp_merge_parts(sc->pv, sc->pi, nb, tid);
        if (tid == 0) out[b] = bi;
        return;
    }
    rs_state st = rs_enter(r, sc, j, stage, d, nb, &sh, red, &sel, fv, fi);
    const bool degenerate = !(st.mx > -INFINITY) || st.mx == INFINITY; /* all -inf / NaN, or a +inf logit: the argmax */
    if (stage == RS_TOPK || stage == RS_TOPP) {
        if (st.pend == stage && !degenerate) { /* this launch's histogram: the values matching the chosen digits */
            for (int k = tid; k < RS_BINS; k += blockDim.x) { sh.n[k] = 0; sh.m[k] = 0; }
            __syncthreads();
            const int shift = 10 * (RS_DIGITS - 1 - d);
            /* a thread adds runs of one bin at once: a peaked row puts most values in a few bins, and one shared
             * atomic per value would queue them there */
            int cur = -1;
            uint32_t cn = 0;
            unsigned long long cm = 0;
            for (int i = i0 + tid; i < i1; i += blockDim.x) {
                const float p = rs_p(r, i, st.mx);
                const uint32_t bits = __float_as_uint(p);
                if (bits < st.lo || (bits >> (shift + 10)) != st.prefix) continue;
                const int bin = (int)((bits >> shift) & (RS_BINS - 1));
                if (bin != cur) {
                    if (cn) { atomicAdd(&sh.n[cur], cn); atomicAdd(&sh.m[cur], cm); }
                    cur = bin;
                    cn = 0;
                    cm = 0;
                }
                cn++;
                cm += rs_fx(p);
            }
            if (cn) { atomicAdd(&sh.n[cur], cn); atomicAdd(&sh.m[cur], cm); }
            __syncthreads();
            rs_hist *h = &sc->h[j % 3];
            for (int k = tid; k < RS_BINS; k += blockDim.x)
                if (sh.n[k]) { atomicAdd(&h->n[k], sh.n[k]); atomicAdd(&h->m[k], sh.m[k]); }
        }
    } else if (stage == RS_MASS) { /* the threshold; each block's kept mass */
        float thr = __uint_as_float(st.thr);
        if (r.a.min_p > 0.0f && r.a.min_p > thr) thr = fminf(r.a.min_p, 1.0f);
        st.thr = __float_as_uint(thr);
        unsigned long long m = 0;
        if (!degenerate)
            for (int i = i0 + tid; i < i1; i += blockDim.x) {
                const float p = rs_p(r, i, st.mx);
                if (p >= thr) m += rs_fx(p);
            }
        m = block_sum(m, red);
        if (tid == 0) sc->bm[x] = m;
    } else { /* RS_DRAW: the block holding u * total finds the id */
        if (degenerate) {
            if (x == 0 && tid == 0) out[b] = st.arg;
            return;
        }
        unsigned long long before = 0, total = 0;
        for (int k = 0; k < nb; k++) { /* every thread: the same nb values (nb <= 128) */
            const unsigned long long v = sc->bm[k];
            if (k < x) before += v;
            total += v;
        }
        const unsigned long long target = (unsigned long long)((double)r.a.u * (double)total);
        const unsigned long long mine = sc->bm[x];
        if (!(before <= target && target < before + mine)) { /* not this block's range */
            if (x == 0 && tid == 0 && total == 0) out[b] = st.arg; /* nothing kept: cannot happen (the max is) */
            return;
        }
        const float thr = __uint_as_float(st.thr);
        const int per = (i1 - i0 + (int)blockDim.x - 1) / (int)blockDim.x, lo = min(i1, i0 + tid * per), hi = min(i1, lo + per);
        unsigned long long sum = 0;
        for (int i = lo; i < hi; i++) {
            const float p = rs_p(r, i, st.mx);
            if (p >= thr) sum += rs_fx(p);
        }
        unsigned long long all;
        unsigned long long run = before + rs_block_excl(sum, red, &all);
        if (run <= target && target < run + sum) { /* exactly one thread (exact sums: it always finds the id) */
            int chosen = st.arg;
            for (int i = lo; i < hi; i++) {
                const float p = rs_p(r, i, st.mx);
                if (p < thr) continue;
                run += rs_fx(p);
                if (run > target) { chosen = i; break; }
            }
            out[b] = chosen;
        }
        return;
    }
    /* the state for the next launch; the histogram after next cleared */
    if (x == 0 && tid == 0) sc->st[j & 1] = st;
    rs_hist *hz = &sc->h[(j + 1) % 3];
    for (int k = x * blockDim.x + tid; k < RS_BINS; k += nb * blockDim.x) { hz->n[k] = 0; hz->m[k] = 0; }
}

/* The launches of one sampling over B rows (need: GPTOSS_SAMPLE_NEED_* of the rows, so stages no row needs are not
 * launched). */
template <class ROWS>
static cudaError_t rs_launch(ROWS rows, int B, int V, unsigned need, float *work, int32_t *out, cudaStream_t s) {
    int nb = RS_MAX_NB / B;
    if (nb < 4) nb = 4;
    if (nb > V) nb = V;
    const size_t wrow = gptoss_sample_work(V);
    const dim3 grid((unsigned)nb, (unsigned)B);
    int j = 0;
    rs_kernel<ROWS><<<grid, RS_THREADS, 0, s>>>(rows, V, nb, work, wrow, j++, RS_MAX, 0, out);
    for (int st = RS_TOPK; st <= RS_TOPP; st++) {
        if (!(need & (st == RS_TOPK ? GPTOSS_SAMPLE_NEED_TOPK : GPTOSS_SAMPLE_NEED_TOPP))) continue;
        for (int d = 0; d < RS_DIGITS; d++) rs_kernel<ROWS><<<grid, RS_THREADS, 0, s>>>(rows, V, nb, work, wrow, j++, st, d, out);
    }
    rs_kernel<ROWS><<<grid, RS_THREADS, 0, s>>>(rows, V, nb, work, wrow, j++, RS_MASS, 0, out);
    rs_kernel<ROWS><<<grid, RS_THREADS, 0, s>>>(rows, V, nb, work, wrow, j++, RS_DRAW, 0, out);
    return cudaGetLastError();
}

unsigned gptoss_sample_need(const gptoss_sample_args *a) {
    if (!(a->temperature > 0.0f)) return 0;
    unsigned n = GPTOSS_SAMPLE_NEED_DRAW;
    if (a->top_k > 0) n |= GPTOSS_SAMPLE_NEED_TOPK;
    if (a->top_p > 0.0f && a->top_p < 1.0f) n |= GPTOSS_SAMPLE_NEED_TOPP;
    return n;
}

cudaError_t gptoss_sample(const float *logits, int V, const int32_t *counts, gptoss_sample_args a, float *work,
                          int32_t *out, cudaStream_t s) {
    if (V <= 0) return cudaErrorInvalidValue;
    if (a.temperature > 0.0f && g_radix) {
        rs_one one;
        memset(&one, 0, sizeof one);
        one.r.logits = logits;
        one.r.counts = (int32_t *)counts;
        one.r.a = a;
        return rs_launch(one, 1, V, gptoss_sample_need(&a), work, out, s);
    }
    if (multiblock_greedy(a, V)) {
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

cudaError_t gptoss_sample_host(const float *logits, int V, const int32_t *counts, gptoss_sample_args a, float *work,
                               int32_t *ctr, int32_t *out, int32_t *out_host, cudaStream_t s) {
    if (V <= 0) return cudaErrorInvalidValue;
    if (multiblock_greedy(a, V) && ctr) {
        float *pv = work;
        int *pi = (int *)(work + ARG_BLOCKS);
        argmax_one_kernel<<<ARG_BLOCKS, ARG_THREADS, 0, s>>>(logits, V, counts, a.frequency_penalty, a.presence_penalty,
                                                               pv, pi, ctr, out, out_host);
        return cudaGetLastError();
    }
    cudaError_t e = gptoss_sample(logits, V, counts, a, work, out, s);
    /* device to device: out_host is the device's view of the host word */
    if (e == cudaSuccess && out_host) e = cudaMemcpyAsync(out_host, out, sizeof(int32_t), cudaMemcpyDeviceToDevice, s);
    return e;
}

__global__ void count_token_kernel(int32_t *counts, const int32_t *token) { counts[*token] += 1; }

cudaError_t gptoss_count_token(int32_t *counts, const int32_t *token, cudaStream_t s) {
    count_token_kernel<<<1, 1, 0, s>>>(counts, token);
    return cudaGetLastError();
}

/* ---- all rows of a batched step in one call (kernels.h gptoss_sample_rows); with the one-block sampler or greedy rows
 * only, three launches.
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
        arg_merge(bv, bi, rs_logit(r, i), i);
    }
    block_argmax(bv, bi, sv, si);
    if (threadIdx.x == 0) { part_v[blockIdx.y * nb + blockIdx.x] = bv; part_i[blockIdx.y * nb + blockIdx.x] = bi; }
}

__global__ void __launch_bounds__(SMP_THREADS) rows_sample_kernel(const gptoss_sample_row *rows, int V, int nb,
                                                                  const float *part_v, const int *part_i, float *work,
                                                                  size_t wrow, int32_t *out) {
    __shared__ float red[33];
    __shared__ float fval[SMP_THREADS];
    __shared__ int fidx[SMP_THREADS];
    const int b = blockIdx.x;
    const gptoss_sample_row r = rows[b];
    if (r.a.temperature > 0.0f) {
        sample_row(r.logits, V, r.counts, r.a, work + (size_t)b * wrow, out + b, red, fval, fidx);
        return;
    }
    if (threadIdx.x >= 32) return; /* one warp merges the row's nb parts in block order */
    const int bi = warp_merge_parts(part_v + (size_t)b * nb, part_i + (size_t)b * nb, nb, threadIdx.x);
    if (threadIdx.x == 0) out[b] = bi;
}

__global__ void rows_count_kernel(const gptoss_sample_row *rows, int B, const int32_t *tok) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B && rows[b].counts && rows[b].count_token) rows[b].counts[tok[b]] += 1;
}

size_t gptoss_sample_rows_work(int B, int V) { return (size_t)B * gptoss_sample_work(V) + 2 * (size_t)B * ARG_BLOCKS; }

cudaError_t gptoss_sample_rows(const gptoss_sample_row *rows, int B, int V, unsigned need, float *work, int32_t *out,
                               cudaStream_t s) {
    if (B <= 0) return cudaSuccess;
    if (V <= 0 || !rows || !work || !out) return cudaErrorInvalidValue;
    if (need && g_radix) { /* a non-greedy row: every row through the multi-block sampler (greedy ones: their argmax) */
        rs_many many = {rows};
        const cudaError_t e = rs_launch(many, B, V, need, work, out, s);
        if (e != cudaSuccess) return e;
        rows_count_kernel<<<(unsigned)((B + 127) / 128), 128, 0, s>>>(rows, B, out);
        return cudaGetLastError();
    }
    /* enough argmax blocks per greedy row to spread its read over the SMs, at least 4 */
    int nb = ARG_BLOCKS / B;
    if (nb < 4) nb = 4;
    const size_t wrow = gptoss_sample_work(V);
    float *part_v = work + (size_t)B * wrow;
    int *part_i = (int *)(part_v + (size_t)B * ARG_BLOCKS);
    rows_argmax_part_kernel<<<dim3((unsigned)nb, (unsigned)B), ARG_THREADS, 0, s>>>(rows, V, nb, part_v, part_i);
    rows_sample_kernel<<<(unsigned)B, SMP_THREADS, 0, s>>>(rows, V, nb, part_v, part_i, work, wrow, out);
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
