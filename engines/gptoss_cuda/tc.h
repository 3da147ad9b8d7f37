/* tc.h — tensor-core matmuls for the T > 1 forward (prompt prefill) at fp32-level accuracy.
 *
 * Why: the SIMT tiled kernels of linear.cu / moe.cu run at a few fp32 TFLOP/s; a prompt's GEMMs are
 * large enough for cuBLAS on bf16 tensor cores. The weights are exact in bf16 (bf16 checkpoint values,
 * and MXFP4 values fp4 * 2^k, dequantized exactly), but the activations are fp32 and must stay so
 * (issue 8's parity). So each activation is split into S bf16 parts, x = x_0 + x_1 (+ x_2):
 * x_0 = bf16(x), x_1 = bf16(x - x_0), x_2 = bf16(x - x_0 - x_1); the parts are stacked along M
 * (rows [S * rows, K]) so ONE GEMM (bf16 in, fp32 accumulate, fp32 out) computes W·x_s for all s, and
 * a small epilogue kernel sums the S partial rows, adds the bias and writes or accumulates into y.
 * S = 2 leaves ~2^-17 of x unrepresented (~1e-5 relative per product, the target);
 * S = 3 reaches fp32's 2^-24 at 1.5x the tensor work (LLMR_GPTOSS_TC_SPLIT=3).
 *
 * MXFP4 experts (grouped): pairs are grouped by expert (gptoss_moe_route) and the expert counts come
 * to the host (one small copy and a stream sync per MoE layer). Batched (no_batched = 0): one kernel
 * dequantizes every used expert of the layer exactly to bf16 (fp4 x 2^k is a bf16), each expert's rows
 * are padded to the busiest expert's count (rounded to 16), part s of pair p at row
 * (s*E + e)*pad + (p - off_e), and S strided-batched GEMMs over the E experts (beta = 1 from the
 * second part on, so the parts are summed by the GEMMs) write one fp32 row per pair; an epilogue adds
 * the bias and compacts. Per expert (no_batched = 1, the engine's default: measured faster on the H200,
 * 246 vs 269 ms for 4,096 tokens, since padding every expert to the busiest one wastes GEMM rows and
 * the per-call host cost turned out small), and whenever the padding would not fit the scratch:
 * part s of pair p at row S*off_e + s*cnt_e + (p - off_e), each expert dequantized just before its
 * GEMM (scratch: one expert), or with dq_all (the engine's default) every used expert by one launch
 * into a scratch of E experts before the GEMMs (fewer host calls after the count sync: 4k prefill
 * 184.9 -> 179.9 ms on the H200).
 *
 * fp16 experts (tc->f16, LLMR_GPTOSS_TC_F16; gptoss_tc_mlp only): one part per activation instead of S,
 * in fp16 (11 significant bits; bf16 has 8), so the experts' GEMMs do half the work. The weights stay
 * exact: expert e's MXFP4 values fp4 x 2^(s-127) are stored as fp16 values fp4 x 2^(s-127-c_e), c_e
 * from the expert's largest scale (gptoss_mxfp4_f16_shifts: its largest value becomes <= 6 x 2^13), which
 * is exact for every block whose scale is within 36 binades of that largest one. Each activation row is
 * scaled by its own power of two 2^r (its largest element into [2^14, 2^15)) before the rounding, so no
 * row overflows or loses bits to fp16's small range; r goes in tc->rshift. The epilogues multiply each
 * output row by 2^(c_e - r) (exact) before the bias. Relative rounding per activation ~2^-12 (two bf16
 * parts: ~2^-17); docs/performance.md "Session 12: the prompt's experts on one fp16 part".
 *
 * All work goes on the stream the handle is bound to; nothing else synchronizes except the count
 * copy in gptoss_tc_experts. Errors: CUDA launches return their cudaError_t; a cuBLAS failure returns
 * cudaErrorUnknown and leaves its status text in tc->why. */
#ifndef GPTOSS_CUDA_TC_H
#define GPTOSS_CUDA_TC_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "engines/gptoss_cuda/kernels.h"

#define GPTOSS_TC_MIN_T 32            /* below this many tokens the SIMT kernels are used */
/* The fp16 experts' GEMMs on gptoss_mxfp4_prompt_gemm up to this many tokens a chunk with the expert cache
 * (tc->prompt_mma's default). H200, 20b, bench/prefill ms, cuBLAS on the cache against it (session 35, call 7, two
 * cuBLAS runs): 384 tokens 19.3-24.0 / 17.4, 512 20.6-24.4 / 19.8, 640 22.9-25.4 / 21.5-21.7, 768 24.9-25.4 /
 * 24.6-24.8, 1,024 29.2-29.6 / 30.3-30.5, 4,096 89.2 / 104.6 (call 6): the cache's reads dominate up to ~800 tokens. */
#define GPTOSS_PROMPT_MMA_MAX_T 768
/* The same without the expert cache: every chunk (sessions 34-35: it beats dequantizing the experts for cuBLAS at every
 * length; H200, 4,096 tokens 112.0 against 105.2 ms). */
#define GPTOSS_PROMPT_MMA_UNCACHED (1 << 20)
/* From this many tokens the prompt's q/k/v/o run K-stacked ("Stacked dense linears", when enabled): H200,
 * 20b, ms stacked vs one q/k/v linear: 128 tokens 17.98 vs 16.49, 512 47.58 vs 46.67, 1,024 70.25 vs
 * 70.83, 4,096 176.76 vs 182.91 (docs/performance.md, session 10) */
#define GPTOSS_DENSE_STACKED_MIN_T 1024
#define GPTOSS_TC_CUBLAS_WS ((size_t)32 << 20) /* cuBLAS workspace, preallocated */
#define GPTOSS_TC_MAX_STREAMS 8       /* GEMM streams of the stacked experts (LLMR_GPTOSS_TC_STREAMS) */

typedef struct gptoss_tc {
    cublasHandle_t handle;
    cudaStream_t stream;
    int splits;             /* S: 2 (hi, lo) or 3 (hi, mid, lo): the prompt's count (the dense entry points take theirs) */
    uint16_t *xs;           /* split activations, bf16, xs_elems */
    size_t xs_elems;
    float *ys;              /* partial products, fp32, ys_elems */
    size_t ys_elems;
    uint16_t *wbf;          /* dequantized expert weights, bf16, wbf_elems (all E experts of a layer) */
    size_t wbf_elems;
    int no_batched;         /* 1: always one GEMM per expert (tests; the fallback when padding is too big) */
    int fast_dequant;       /* 1: the block-per-thread dequantization kernel (LLMR_GPTOSS_TC_FASTDQ=1) */
    int dq_all;             /* per-expert path: 1 = every used expert dequantized by one launch into wbf (room
                             * for E experts), then the GEMMs; 0 = a launch before each GEMM (one expert of
                             * scratch). Same values; fewer host calls per layer (LLMR_GPTOSS_TC_DQ_ALL) */
    int32_t *counts_host;   /* pinned [2 GPTOSS_MAX_EXPERTS]: the expert counts, then the precise rows' (fetch_counts_precise) */
    int counts_fetched;     /* how many of them the last fetch read: E, 2E, or 0 after a failed one */
    char why[160];          /* the last cuBLAS failure, for the caller's message */
    /* K-stacked experts (tc_stacked.cu; see "Stacked experts" below) */
    uint16_t *wst[2];       /* dequantized stacked weights of every expert: [0] gate_up, [1] down */
    size_t wst_elems[2];
    cudaStream_t side;      /* the dequantization stream (non-blocking), made by gptoss_tc_init */
    cudaEvent_t ev_ready[2], ev_free[2]; /* wst[i] written (side) / last read by a GEMM (stream) */
    int ahead;              /* 1: whole-layer prefetch one layer ahead; 0: used experts, in the layer */
    int per_expert[2];      /* how wst[i] was last filled: 1 per expert (ev_exp), 0 all at once (ev_ready) */
    cudaEvent_t *ev_exp[2]; /* [GPTOSS_MAX_EXPERTS] expert e of wst[i] written (per-expert mode) */
    int n_streams;          /* GEMM streams: tc->stream plus n_streams - 1 aux (GPTOSS_TC_MAX_STREAMS) */
    cudaStream_t aux[GPTOSS_TC_MAX_STREAMS];
    cublasHandle_t aux_handle[GPTOSS_TC_MAX_STREAMS];
    void *aux_ws[GPTOSS_TC_MAX_STREAMS];     /* each aux handle's own workspace (owned here) */
    cudaEvent_t ev_fork, ev_join[GPTOSS_TC_MAX_STREAMS];
    uint16_t *wd;           /* one dense weight stacked [W | W | b, 0 x 7] (gptoss_tc_linear_stacked) */
    size_t wd_elems;
    int f16;                /* 1: gptoss_tc_mlp's experts on one fp16 part (see "fp16 experts" above) */
    int32_t *rshift;        /* fp16 experts: each pair's row shift r, gate_up's then down's ([2, P]) */
    size_t rshift_elems;
    int prompt_mma;         /* fp16 experts: chunks of up to this many tokens run their GEMMs on the MXFP4 weights
                             * (gptoss_mxfp4_prompt_gemm, where the tiled weights are given), longer ones on cuBLAS;
                             * 0: cuBLAS always (LLMR_GPTOSS_PROMPT_MMA) */
} gptoss_tc;

/* Scratch sizes (elements) the forward needs for chunks of `chunk` tokens with S splits, for
 * hidden H, q width QD, intermediate I, E experts (pass E = 1 to wbf unless batched). Used by the
 * workspace layout, so the VRAM estimate counts them. */
size_t gptoss_tc_xs_elems(int chunk, int splits, int H, int QD, int I, int batched);
size_t gptoss_tc_ys_elems(int chunk, int splits, int H, int QD, int I, int E);
size_t gptoss_tc_wbf_elems(int H, int I, int E);

/* Creates the cuBLAS handle bound to `stream` with `cublas_ws` (GPTOSS_TC_CUBLAS_WS bytes, device)
 * as its workspace, and pins the count buffer. Scratch pointers are set by the caller afterwards.
 * Returns 0, or -1 with the cause in err. */
int gptoss_tc_init(gptoss_tc *tc, cudaStream_t stream, int splits, void *cublas_ws, char *err, size_t err_size);

/* Frees what gptoss_tc_init made (not the scratch, which the caller owns). Accepts a zeroed struct. */
void gptoss_tc_destroy(gptoss_tc *tc);

/* y[t, n] (+)= sum_k x[t, k] * W[n, k] + b[n], as gptoss_linear (kernels.h), on tensor cores, x split into S = splits
 * (1..3) bf16 parts (the prompt passes tc->splits, the batched decode step its own count).
 * Needs S*T*K <= xs_elems and S*T*N <= ys_elems (else cudaErrorInvalidValue), K % 8 == 0.
 * x == NULL: tc->xs already holds the S parts of the T rows (gptoss_rows_norm_split); only the GEMM and the reduce. */
cudaError_t gptoss_tc_linear(gptoss_tc *tc, int splits, const float *x, int ldx, const uint16_t *W, const uint16_t *b,
                             int T, int K, int N, float *y, int ldy, int accumulate);

/* Several linears over the same x whose weights (and biases) lie back to back in memory, e.g. q, k and v:
 * W [N, K] with N = the sum of the segments' n, b [N] (may be NULL). Segment g's outputs are columns
 * off .. off + n - 1 of the product, written (not accumulated) to y[g] with row stride ldy[g]. One split,
 * one GEMM and one reduce launch instead of three of each. Offsets must be 0, n0, n0 + n1, ... */
#define GPTOSS_TC_MAX_SEGS 3
typedef struct gptoss_tc_segs {
    int count;
    int off[GPTOSS_TC_MAX_SEGS], n[GPTOSS_TC_MAX_SEGS], ldy[GPTOSS_TC_MAX_SEGS];
    float *y[GPTOSS_TC_MAX_SEGS];
} gptoss_tc_segs;
cudaError_t gptoss_tc_linear_segs(gptoss_tc *tc, int splits, const float *x, int ldx, const uint16_t *W, const uint16_t *b,
                                  int T, int K, const gptoss_tc_segs *segs);

/* Whether the scratch holds a linear of T rows (or grouped pairs) in `splits` parts: S T K split values (xs) and
 * S T N partial products (ys). The tensor-core linears refuse, before any launch, what does not fit; callers that
 * split into tc->xs themselves ask first. */
int gptoss_tc_fits(const gptoss_tc *tc, int splits, int T, int K, int N);

/* The GEMM alone over rows already split into tc->xs (S = splits parts of T rows): tc->ys [S T, N] = part rows
 * times W [N, K]^T, for a caller that sums the parts itself (gptoss_rows_qkv_finish). cudaErrorInvalidValue (before
 * any launch) where the scratch is too small. */
cudaError_t gptoss_tc_gemm_split(gptoss_tc *tc, int splits, const uint16_t *W, int K, int N, int T);

/* Reads the expert counts (device, from gptoss_moe_route) into tc->counts_host; waits for them. */
cudaError_t gptoss_tc_fetch_counts(gptoss_tc *tc, const int32_t *counts_dev, int E);
/* The same for a routing by gptoss_moe_route_precise: 2E counts (the precise rows' lo_e after the E counts). */
cudaError_t gptoss_tc_fetch_counts_precise(gptoss_tc *tc, const int32_t *counts_dev, int E);

/* As gptoss_mxfp4_grouped (kernels.h) for P = 4T grouped pairs, on tensor cores, with the counts
 * already on the host (gptoss_tc_fetch_counts): y[p, n] = sum_k x[row(p), k] * W_e[n, k] + b[e, n].
 * wbf_all: every expert's weight already dequantized, [E, N, K] bf16 (the engine's expert cache,
 * gptoss_mxfp4_dequant_all's output), or NULL: the used experts are dequantized into tc->wbf first. The
 * same values either way, so the same results bit for bit. */
cudaError_t gptoss_tc_experts(gptoss_tc *tc, const float *x, int ldx, const int32_t *gather, const uint8_t *blocks,
                              const uint8_t *scales, const uint16_t *wbf_all, const uint16_t *b,
                              const int32_t *counts_dev, const int32_t *offsets_dev, int E, int P, int K, int N,
                              float *y);

/* One expert projection's weights for gptoss_tc_mlp: MXFP4 blocks and scales [E, N, K], the expert cache [E, N, K]
 * or NULL (as wbf_all above; with tc->f16 the cache holds gptoss_mxfp4_dequant_f16_all's fp16 values), the bias
 * [E, N] bf16 or NULL, and with tc->f16 the experts' shifts c_e (gptoss_mxfp4_f16_shifts, device [E]) and the same
 * weights in gptoss_mxfp4_tile's layout or NULL (tiled: with it and tc->f16, chunks of up to tc->prompt_mma tokens
 * take gptoss_mxfp4_prompt_gemm instead of cuBLAS). Borrowed. */
typedef struct gptoss_tc_experts_w {
    const uint8_t *blocks, *scales;
    const uint16_t *bf16, *bias;
    const int32_t *shift;
    const gptoss_mxfp4_tiled *tiled;
} gptoss_tc_experts_w;

/* The MoE block after routing, for T tokens (P = 4T grouped pairs, counts on the host as for
 * gptoss_tc_experts): x[t] += sum_k rw[t, k] * y[pair_of[t, k]] with y[p] = down_e(swiglu(gate_up_e(h[row(p)])))
 * and the biases (gate_up [2I, H], gate / up interleaved; down [H, I]). The same bits as gptoss_tc_experts
 * (gate_up) + gptoss_swiglu + gptoss_tc_experts (down) + gptoss_moe_combine, with two kernels between and
 * after the GEMMs instead of five: gate_up reduce + SwiGLU + down split, and down reduce + combine. So the
 * [P, 2I], [P, I] and [P, H] fp32 rows between them are never written (at 4,096 tokens on 20b ~1.5 GB of
 * traffic a layer). Returns cudaErrorNotSupported (the caller then makes the four calls) where
 * gptoss_tc_experts would take the batched layout, when I is odd, H not a multiple of 4 or x not 16-byte
 * aligned; cudaErrorInvalidValue as gptoss_tc_experts. With tc->f16 the GEMMs take one fp16 part ("fp16
 * experts" above: not the bits of the bf16 calls; needs gu->shift, dn->shift, 2P <= rshift_elems and
 * I <= GPTOSS_TC_F16_MAX_I, else cudaErrorInvalidValue / cudaErrorNotSupported); the four calls it stands for
 * have no fp16 form, so a caller falling back from it must not pass them an fp16 cache.
 *
 * Precise rows (Tp > 0, fp16 experts only, else cudaErrorInvalidValue): the tokens t < Tp take a second fp16 part
 * per activation, the rounding residual of the first, in GEMM rows of their own (each expert's M grows by its
 * precise pairs; the weights are read once), so their products hold the activations to ~2^-22 as the tensor-core
 * kernel's two fp16 parts do (kernels.h gptoss_mxfp4_mma_stream_f16), while the other rows keep one part. A packed
 * prefill gives them to its short prompts, which alone take that kernel (forward.cu). Needs the routing of
 * gptoss_moe_route_precise with the same Tp (counts and offsets of 2E) fetched by gptoss_tc_fetch_counts_precise,
 * and scratch for P + 4 Tp rows (two splits' worth holds them); cudaErrorInvalidValue otherwise, before any launch. */
cudaError_t gptoss_tc_mlp(gptoss_tc *tc, const float *h, int ldh, const int32_t *gather, const gptoss_tc_experts_w *gu,
                          const gptoss_tc_experts_w *dn, const int32_t *counts_dev, const int32_t *offsets_dev,
                          const float *rw, const int32_t *pair_of, int E, int T, int Tp, int H, int I, float alpha,
                          float limit, float *x);
/* Whether gptoss_tc_mlp takes a chunk's experts from the counts on the device alone (the fp16 experts on
 * gptoss_mxfp4_prompt_gemm, the per-expert layout): then it needs no gptoss_tc_fetch_counts first (no host sync a layer),
 * and checks only what it can without the counts. */
int gptoss_tc_mlp_device_counts(const gptoss_tc *tc, const gptoss_tc_experts_w *gu, const gptoss_tc_experts_w *dn, int E,
                                int T, int Tp, int H, int I);

/* Attention with sinks for a T-token chunk, as gptoss_attention (kernels.h), on tensor cores
 * (attention_tc.cu: flash-attention style, Q/K/P/V split into bf16 hi + lo, three products each): the
 * GQA-block kernel (one KV head and its query heads per block) where the heads per KV head divide 8 and
 * the card allows its shared memory per block, else the per-head kernel (LLMR_GPTOSS_ATC picks, for
 * comparisons). kvs: scratch for the chunk's keys split once into hi / lo (gptoss_atc_kvs_elems(n_kv,
 * kvs_keys) bf16, caller-owned, overwritten) or NULL; with it, and when every key the chunk sees (from the
 * window's start, or 0, to pos0 + T - 1) fits kvs_keys, the blocks copy those instead of splitting the cache
 * rows themselves. Same other arguments; n_heads <= 65535. */
cudaError_t gptoss_attention_tc(const float *q, gptoss_kv kv, const uint16_t *sinks, int T, int pos0, int n_heads,
                                int n_kv, int window, float *out, uint16_t *kvs, int kvs_keys, cudaStream_t stream);

/* bf16 elements of gptoss_attention_tc's pre-split scratch for kvs_keys keys of n_kv KV heads (K and V, hi and lo). */
static inline size_t gptoss_atc_kvs_elems(int n_kv, int kvs_keys) { return (size_t)n_kv * kvs_keys * 4 * GPTOSS_HEAD_DIM; }
/* Keys the engine's pre-split scratch holds (64 MB on 20b); chunks that see more keys split in the kernel. */
#define GPTOSS_ATC_KVS_KEYS 16384

/* ---- the pieces (exposed for the kernel tests) */

/* Split rows of x into S bf16 parts: dense (offsets NULL): part s of row r at xs[(s*rows + r) * K];
 * grouped: see the header comment (row source gather ? gather[p] : p). */
cudaError_t gptoss_tc_split(const float *x, int ldx, const int32_t *gather, const int32_t *offsets,
                            const int32_t *counts, int E, int rows, int K, int splits, uint16_t *xs,
                            cudaStream_t stream);

/* y[r, n] (+)= sum_s ys[part_s(r), n] + b[(grouped ? e*N : 0) + n] (b may be NULL). */
cudaError_t gptoss_tc_reduce(const float *ys, const int32_t *offsets, const int32_t *counts, int E, int rows, int N,
                             int splits, const uint16_t *b, float *y, int ldy, int accumulate, cudaStream_t stream);

/* w[n, k] = bf16 of expert e's MXFP4 weight (exact), blocks [E, N, K/32, 16], scales [E, N, K/32].
 * fast = 0: a thread per byte (measured on the H200); fast = 1: a thread per 16-byte block, 128-bit
 * loads and stores, no constant-memory table (same bits; checked by the kernel tests, not yet timed). */
cudaError_t gptoss_mxfp4_dequant(const uint8_t *blocks, const uint8_t *scales, int e, int N, int K, uint16_t *w,
                                 int fast, cudaStream_t stream);

/* The same for all E experts into w [E, N, K]; experts with counts[e] == 0 (device) are skipped and
 * their slice left as it was (counts may be NULL: all). */
cudaError_t gptoss_mxfp4_dequant_all(const uint8_t *blocks, const uint8_t *scales, const int32_t *counts, int E, int N,
                                     int K, uint16_t *w, int fast, cudaStream_t stream);

/* fp16 experts: c_e of each of E experts from its scales [E, N, K/32] (shift[e] = largest scale - 127 -
 * GPTOSS_TC_F16_TOP). K % 32 == 0. */
#define GPTOSS_TC_F16_TOP 13     /* an expert's largest value fp4 x 2^(s-127) becomes <= 6 x 2^13 in fp16 */
#define GPTOSS_TC_F16_MAX_I 8192 /* the SwiGLU row of one pair in shared memory (fp16 down input's row scale) */
cudaError_t gptoss_mxfp4_f16_shifts(const uint8_t *scales, int E, int N, int K, int32_t *shift, cudaStream_t stream);

/* w[e] = expert e's MXFP4 weight as fp16 values fp4 x 2^(s-127-shift[e]), rounded to nearest (exact for
 * scales within 36 binades of the expert's largest), [E, N, K]; experts with counts[e] == 0 skipped (counts
 * may be NULL). K % 32 == 0. */
cudaError_t gptoss_mxfp4_dequant_f16_all(const uint8_t *blocks, const uint8_t *scales, const int32_t *shift,
                                         const int32_t *counts, int E, int N, int K, uint16_t *w, cudaStream_t stream);

/* ---- Stacked experts (tc_stacked.cu; behind LLMR_GPTOSS_TC_STACKED=1, off by default: on the H200 it
 * was no faster at 4,096 tokens and slower at 1,024 than the path above, docs/performance.md session 5)
 *
 * Why: the path above writes S fp32 partial rows per pair (ys) and reads them back in a reduce pass,
 * ~1.1 GB per layer at 4,096 tokens, and dequantizes each expert just before its GEMM (nothing
 * overlaps it). Here the S parts are stacked along K instead of M: activation row p is
 *   xs[p] = [ x_0 (K) | x_1 (K) | (x_2 (K)) | 1, 0 x 7 ]            (Ks = S*K + 8 bf16)
 * and each expert's weight is dequantized S times side by side with its bias in the pad column:
 *   W'[n] = [ W[n] | W[n] | (W[n]) | b[n], 0 x 7 ]                  ([N, Ks] bf16, exact)
 * so ONE GEMM per expert (M = its pair count, K = Ks) sums the parts and adds the bias in its fp32
 * accumulator and writes the output rows (pair order) directly: no ys, no reduce, no bias pass. The
 * dequantization has no data dependency on the activations, so it runs on a second stream (tc->side)
 * into a scratch holding all E experts of one projection (wst[0] gate_up, wst[1] down): either a whole
 * layer ahead (tc->ahead; ev_ready) or the used experts in the layer, an event each (ev_exp), ordered
 * against the GEMMs that last read the scratch by ev_free. Measured (H200): the GEMMs with M = one
 * expert's pairs are no faster than the split path's 2x taller ones, and the side stream's writes slow
 * whatever they overlap; see docs/performance.md, session 5. Numerics: the same products
 * as the split path (bf16 parts of x times exact bf16 weights, fp32 accumulation), summed in one
 * accumulator instead of in a reduce; the bias enters as b * 1.0 (exact). */
#define GPTOSS_TC_KPAD 8 /* the bias column plus zeros: Ks stays a multiple of 8 (16-byte rows) */

/* Ks for K inputs and S parts. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int gptoss_tc_kstack(int K, int splits) { return splits * K + GPTOSS_TC_KPAD; }

/* Elements of one projection's stacked scratch for E experts ([E, N, Ks]) and of the stacked
 * activations for `chunk` tokens (P = 4 * chunk rows of Ks = S * max(H, I) + 8). */
size_t gptoss_tc_wst_elems(int K, int N, int E, int splits);
size_t gptoss_tc_xst_elems(int chunk, int splits, int H, int I);

/* xs[p, :] = the stacked row of x[gather ? gather[p] : p] (layout above). Needs K % 8 == 0 and
 * ldx % 4 == 0 (float4 loads), else cudaErrorInvalidValue. */
cudaError_t gptoss_tc_split_stacked(const float *x, int ldx, const int32_t *gather, int rows, int K, int splits,
                                    uint16_t *xs, cudaStream_t stream);

/* w[e] = W'_e for all E experts (layout above; bias b [E, N] bf16, may be NULL: zeros). The values are
 * bit for bit those of gptoss_mxfp4_dequant (same rule). K % 32 == 0. */
cudaError_t gptoss_mxfp4_dequant_stacked(const uint8_t *blocks, const uint8_t *scales, const uint16_t *b, int E,
                                         int N, int K, int splits, uint16_t *w, cudaStream_t stream);

/* GEMM streams for the per-expert GEMMs (gptoss_tc_experts with every weight in place: dq_all or the expert
 * cache; the stacked experts): n_streams (1..GPTOSS_TC_MAX_STREAMS), the extra ones each with its own
 * cuBLAS handle and GPTOSS_TC_CUBLAS_WS workspace. The used experts go round robin over them, so several
 * experts' GEMMs fill the GPU together where one expert's rows make too few tiles; each GEMM is the same
 * call on its own rows, so the results do not change. Call after gptoss_tc_init; gptoss_tc_destroy frees
 * it all. Returns 0, or -1 with the cause in err. */
int gptoss_tc_streams_setup(gptoss_tc *tc, int n_streams, char *err, size_t err_size);

/* Sets up the stacked experts' GEMM streams (gptoss_tc_streams_setup) and dequantization mode: the
 * per-expert events; ahead: see gptoss_tc_prefetch. Returns 0, or -1 with the cause in err. */
int gptoss_tc_stacked_setup(gptoss_tc *tc, int n_streams, int ahead, char *err, size_t err_size);

/* Enqueues on tc->side, after the GEMMs that last read wst[which], the stacked dequantization of one
 * projection (which 0: gate_up, 1: down) into wst[which]: with used_only = 0 every expert in one launch
 * (then ev_ready[which]; for the prefetch one layer ahead, tc->ahead = 1); with used_only = 1 only the
 * experts with tokens (counts already on the host), one launch each, each followed by its ev_exp event
 * so the GEMM of expert e waits only for its own weights. Needs E * N * Ks <= wst_elems[which]. */
cudaError_t gptoss_tc_prefetch(gptoss_tc *tc, int which, const uint8_t *blocks, const uint8_t *scales,
                               const uint16_t *b, int E, int N, int K, int used_only);

/* As gptoss_tc_experts (same y, with the bias), from the weights gptoss_tc_prefetch(which) put in
 * wst[which] for this layer, the counts already on the host: splits x into stacked rows and runs one
 * GEMM per used expert over the GEMM streams (each waiting for its weights), joins them back into
 * tc->stream and records ev_free[which]. Needs P * Ks <= xs_elems, K % 8 == 0, ldx % 4 == 0; counts not
 * summing to P: cudaErrorInvalidValue. */
cudaError_t gptoss_tc_experts_stacked(gptoss_tc *tc, int which, const float *x, int ldx, const int32_t *gather, int E,
                                      int P, int K, int N, float *y);

/* ---- Stacked dense linears (the prompt's q/k/v/o/router; the batched step keeps gptoss_tc_linear)
 * The same trick for a bf16 weight: gptoss_tc_stack_weight writes W' = [W | W | b, 0 x 7] into tc->wd
 * (a copy, 2x the weight's bytes, ~30 us for q_proj), and one GEMM over rows that
 * gptoss_tc_split_stacked wrote into tc->xs gives y (+)= x W^T + b with no fp32 partials and no reduce.
 * q, k and v share one split of their input. */

/* Elements of tc->wd for the dense linears of a model (the largest N * Ks among them). */
size_t gptoss_tc_wd_elems(int H, int QD, int KVD, int E, int splits);

/* wd = [W | W | (W) | b, 0 x 7] ([N, Ks], b may be NULL). W 16-byte aligned and K % 8 == 0. */
cudaError_t gptoss_tc_stack_weight(const uint16_t *W, const uint16_t *b, int N, int K, int splits, uint16_t *wd,
                                   cudaStream_t stream);

/* y[t, n] (+)= sum_k x[t, k] W[n, k] + b[n] as gptoss_tc_linear, from the T stacked rows already in
 * tc->xs (gptoss_tc_split_stacked of x with K and tc->splits): one GEMM (beta = accumulate) on the stacked
 * weight, which is Wst where given (gptoss_tc_stack_weight's output for W, b and tc->splits, kept by the
 * caller: the model keeps every layer's from load where memory allows, model.cu dense_stacked_fill), else
 * W stacked into tc->wd first (~1 ms of a 20b chunk). Needs T * Ks <= xs_elems, and without Wst N * Ks <=
 * wd_elems, else cudaErrorInvalidValue. The same bits either way. */
cudaError_t gptoss_tc_linear_stacked(gptoss_tc *tc, const uint16_t *W, const uint16_t *b, const uint16_t *Wst, int T,
                                     int K, int N, float *y, int ldy, int accumulate);

/* ---- Shared by tc.cu and tc_stacked.cu */

/* Records "cuBLAS <what>: <status>" in tc->why and returns cudaErrorUnknown (the caller's message). */
cudaError_t gptoss_tc_blas_fail(gptoss_tc *tc, const char *what, cublasStatus_t s);

/* Whether the counts on the host (gptoss_tc_fetch_counts) sum to P pairs, i.e. were fetched for this routing;
 * the expert paths refuse them otherwise. */
int gptoss_tc_counts_match(const gptoss_tc *tc, int E, int P);

/* The experts' GEMM streams: GEMM stream 0 is tc->stream (tc->handle), i > 0 is tc->aux[i] (tc->aux_handle[i]).
 * gptoss_tc_gemm_streams: how many are set up (1 without gptoss_tc_streams_setup). gptoss_tc_fork: streams
 * 1..ns-1 wait for the work queued on tc->stream so far. gptoss_tc_join: tc->stream waits for streams
 * 1..ns-1; call it after a fork whatever happened since (also after an error, so tc->stream continues after
 * every GEMM); returns r, or the first join error when r is cudaSuccess. */
int gptoss_tc_gemm_streams(const gptoss_tc *tc);
cudaError_t gptoss_tc_fork(gptoss_tc *tc, int ns);
cudaError_t gptoss_tc_join(gptoss_tc *tc, int ns, cudaError_t r);

#ifdef __CUDACC__
#include <cuda_bf16.h>

/* The bf16 bits of v, rounded to nearest even. */
static __device__ __forceinline__ uint32_t gptoss_tc_bf16_bits(float v) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* v as `splits` bf16 parts v_0 = bf16(v), v_1 = bf16(v - v_0), ...: part s at dst[s * part_stride]. Every writer of
 * the dense split (tc_split_kernel, gptoss_rows_norm_split, gptoss_attention_rows_split) goes through here. */
static __device__ __forceinline__ void gptoss_tc_split_value(float v, uint16_t *dst, size_t part_stride, int splits) {
    for (int s = 0; s < splits; s++) {
        const uint16_t b = (uint16_t)gptoss_tc_bf16_bits(v);
        dst[(size_t)s * part_stride] = b;
        v -= __uint_as_float((uint32_t)b << 16); /* exact: the rounding residual of v */
    }
}

/* One output of a split GEMM: its `splits` parts (part s at y[s * part_stride]) added in part order, then the bias *b
 * (b NULL: none). Every reader of the dense and grouped parts (tc_reduce_kernel, tc_reduce_segs_kernel,
 * gptoss_rows_qkv_finish, the batched router's o_proj sum) goes through here, so each gives the same bits. */
static __device__ __forceinline__ float gptoss_tc_part_sum(const float *y, size_t part_stride, int splits, const uint16_t *b) {
    float v = y[0];
    for (int s = 1; s < splits; s++) v += y[(size_t)s * part_stride];
    if (b) v += gptoss_bf16_to_f32(*b);
    return v;
}

/* One MXFP4 block (16 bytes b, E8M0 scale s) as 32 bf16, two per word in k order: the exact
 * dequantization rule (fp32 product fp4 x 2^(s-127), its upper half; s = 0 is 2^-127, a subnormal;
 * s = 255, never in a checkpoint, through ldexpf). tbl holds the 16 e2m1 values (shared memory). */
static __device__ __forceinline__ void gptoss_tc_mxfp4_block(const float *tbl, uint4 b, uint32_t s, uint32_t out[16]) {
    const uint32_t word[4] = {b.x, b.y, b.z, b.w};
    const float sc = __uint_as_float(s ? s << 23 : 0x00400000u);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const uint32_t byte = (word[j >> 2] >> (8 * (j & 3))) & 0xffu;
        float lo = tbl[byte & 15] * sc, hi = tbl[byte >> 4] * sc;
        if (s == 255) {
            lo = ldexpf(tbl[byte & 15], 128);
            hi = ldexpf(tbl[byte >> 4], 128);
        }
        out[j] = (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
    }
}
#endif

#endif
