/* gptoss/ref_math.h — the building blocks of the gpt-oss forward pass in plain fp32 C.
 *
 * These are the pieces the C reference (gptoss/ref_model.h) is made of, kept separate so each known
 * bug of other implementations (shared reference gpt-oss.md §5) has a unit test against its own block:
 * attention sinks, the sliding window, YaRN NeoX rotate-half RoPE, top-4-then-softmax routing, the
 * clamped SwiGLU with +1 on up, interleaved gate/up rows, MXFP4 nibble order. All functions are pure;
 * buffers are caller-owned and shapes are stated with each prototype. */
#ifndef LLMR_GPTOSS_REF_MATH_H
#define LLMR_GPTOSS_REF_MATH_H

#include <stddef.h>
#include <stdint.h>

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], n values. out may alias x. */
void gptoss_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* out[r] = W[r,:] . x + (b ? b[r] : 0) for r in [0, rows); W row-major [rows, cols]. threads > 1 splits
 * the rows over that many pthreads (same result as one thread: each row is summed the same way). */
void gptoss_matvec(float *out, const float *W, const float *b, const float *x, int rows, int cols, int threads);

/* NeoX rotate-half RoPE on one head of dim d, in place: with x1 = x[0:d/2], x2 = x[d/2:d],
 * x1' = x1*c - x2*s, x2' = x2*c + x1*s, where c[i] = cos(pos*inv_freq[i]) * attn_factor and
 * s[i] = sin(pos*inv_freq[i]) * attn_factor (the YaRN attention factor scales both). */
void gptoss_rope(float *x, int d, int pos, const float *inv_freq, float attn_factor);

/* One query head over n keys (rows of a [n, d] K and V with a row stride of `stride` floats):
 * s_j = q.k_j * scale for the keys j in [first, n) (the caller applies the causal / sliding window by
 * choosing first), p = softmax over {s_j} plus one extra logit `sink` that has no value vector,
 * out = sum_j p_j v_j. Returns the probability mass given to the sink. Needs n - first <= scratch_len
 * (scores scratch). */
float gptoss_attend_head(float *out, const float *q, const float *K, const float *V, int n, int first, int d,
                         size_t stride, float scale, float sink, float *scratch);

/* The same for nq query heads that share one KV head (GQA): q [nq, d], sinks [nq], out [nq, d],
 * sink_mass [nq] (optional) receives each head's sink probability; scratch holds nq * (n - first). */
void gptoss_attend_group(float *out, const float *q, int nq, const float *K, const float *V, int n, int first, int d,
                         size_t stride, float scale, const float *sinks, float *scratch, float *sink_mass);

/* Router: indices of the k largest of logits[n] (ties to the lower index), sorted by logit descending,
 * and weights = softmax over ONLY those k logits. k <= n <= 256. */
void gptoss_route_topk(const float *logits, int n, int k, int *idx_out, float *w_out);

/* Clamped SwiGLU over an interleaved gate/up vector gu[2*n] (gate = even entries, up = odd):
 * g = min(gate, limit), u = clamp(up, -limit, limit), out[i] = g*sigmoid(alpha*g) * (u + 1). */
void gptoss_swiglu(float *out, const float *gu, int n, float alpha, float limit);

/* Dequantizes one MXFP4 matrix of `rows` rows and `cols` columns (cols % 32 == 0) to fp32 row-major:
 * blocks [rows, cols/32, 16] (byte j holds element 2j in its low nibble, 2j+1 in its high nibble),
 * scales [rows, cols/32] as E8M0 (value 2^(s-127)). */
void gptoss_mxfp4_dequant(float *out, const uint8_t *blocks, const uint8_t *scales, int rows, int cols);

#endif
