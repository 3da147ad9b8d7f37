/* engine.cu — the llmr engine ABI (llmr_engine.h) on top of model.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "engines/gptoss_cuda/debug_api.h"
#include "engines/gptoss_cuda/model.h"

#define GPTOSS_CUDA_VERSION "0.1.0"

static void set_err(char *err, size_t es, const char *msg) {
    if (err && es) {
        strncpy(err, msg, es - 1);
        err[es - 1] = '\0';
    }
}

static llmr_engine_status bad_args(char *err, size_t es, const char *msg) {
    set_err(err, es, msg);
    return LLMR_ENGINE_UNSUPPORTED;
}

static gptoss_model *M(llmr_engine_model *m) { return (gptoss_model *)m; }
static gptoss_session *S(llmr_engine_session *s) { return (gptoss_session *)s; }

static llmr_engine_status e_describe(llmr_engine_info *out) {
    if (!out) return LLMR_ENGINE_OK;
    llmr_engine_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    info.id = "gptoss_cuda";
    info.version = GPTOSS_CUDA_VERSION;
    info.description = "gpt-oss on one NVIDIA GPU (sm_90): packed MXFP4 experts, bf16 weights, fp32 activations";
    info.abi_version = LLMR_ENGINE_ABI_VERSION;
    info.uses_gpu = 1;
    uint32_t sz = out->struct_size && out->struct_size < sizeof info ? out->struct_size : (uint32_t)sizeof info;
    info.struct_size = sz;
    memcpy(out, &info, sz);
    return LLMR_ENGINE_OK;
}

/* Reads the load parameters a host may have left short (older minor). */
static void load_params(const llmr_load_params *p, int *device, uint64_t *budget, uint32_t *ctx, uint32_t *sess,
                        const llmr_host_api **host) {
    *device = 0; *budget = 0; *ctx = 0; *sess = 0; *host = NULL;
    if (!p) return;
    if (LLMR_HAS_FIELD(p, llmr_load_params, device)) *device = p->device;
    if (LLMR_HAS_FIELD(p, llmr_load_params, vram_budget_bytes)) *budget = p->vram_budget_bytes;
    if (LLMR_HAS_FIELD(p, llmr_load_params, max_context)) *ctx = p->max_context;
    if (LLMR_HAS_FIELD(p, llmr_load_params, max_sessions)) *sess = p->max_sessions;
    if (LLMR_HAS_FIELD(p, llmr_load_params, host)) *host = p->host;
}

static llmr_engine_status e_estimate(const llmr_model_descriptor *d, const llmr_load_params *p, uint64_t *bytes,
                                     char *err, size_t es) {
    if (!d || !d->model_dir || !bytes) return bad_args(err, es, "estimate_vram: descriptor with model_dir and bytes_out required");
    int dev; uint64_t budget; uint32_t ctx, sess; const llmr_host_api *host;
    load_params(p, &dev, &budget, &ctx, &sess, &host);
    uint64_t b = 0;
    llmr_engine_status st = gptoss_model_estimate(d->model_dir, ctx, sess, &b, err, es);
    if (st == LLMR_ENGINE_OK) *bytes = b;
    return st;
}

static llmr_engine_status e_load(const llmr_model_descriptor *d, const llmr_load_params *p, llmr_engine_model **out,
                                 char *err, size_t es) {
    if (!d || !d->model_dir || !out) return bad_args(err, es, "load: descriptor with model_dir and model_out required");
    int dev; uint64_t budget; uint32_t ctx, sess; const llmr_host_api *host;
    load_params(p, &dev, &budget, &ctx, &sess, &host);
    gptoss_model *m = NULL;
    llmr_engine_status st = gptoss_model_load(d->model_dir, dev, budget, ctx, sess, host, &m, err, es);
    if (st == LLMR_ENGINE_OK) *out = (llmr_engine_model *)m;
    return st;
}

static void e_unload(llmr_engine_model *m) { gptoss_model_free(M(m)); }

static llmr_engine_status e_session_create(llmr_engine_model *m, const llmr_session_params *p, llmr_engine_session **out,
                                           char *err, size_t es) {
    if (!m || !out) return bad_args(err, es, "session_create: model and session_out required");
    uint32_t ctx = p && LLMR_HAS_FIELD(p, llmr_session_params, max_context) ? p->max_context : 0;
    gptoss_session *s = NULL;
    llmr_engine_status st = gptoss_session_new(M(m), ctx, &s, err, es);
    if (st == LLMR_ENGINE_OK) *out = (llmr_engine_session *)s;
    return st;
}

static void e_session_destroy(llmr_engine_session *s) { gptoss_session_free(S(s)); }

static llmr_engine_status e_generate(llmr_engine_session *s, const llmr_generate_request *req, llmr_token_cb cb,
                                     void *user, llmr_generate_result *res, char *err, size_t es) {
    if (!s || !req) return bad_args(err, es, "generate: session and request required");
    if (!LLMR_HAS_FIELD(req, llmr_generate_request, sampling))
        return bad_args(err, es, "generate: request struct_size too small");
    return gptoss_session_generate(S(s), req, cb, user, res, err, es);
}

static void e_cancel(llmr_engine_session *s) { gptoss_session_cancel(S(s)); }

static llmr_engine_status e_stats(llmr_engine_model *m, llmr_engine_stats *out) {
    if (!m || !out) return LLMR_ENGINE_OK;
    llmr_engine_stats st;
    memset(&st, 0, sizeof st);
    gptoss_model_stats(M(m), &st);
    uint32_t sz = out->struct_size && out->struct_size < sizeof st ? out->struct_size : (uint32_t)sizeof st;
    st.struct_size = sz;
    memcpy(out, &st, sz);
    return LLMR_ENGINE_OK;
}

static const llmr_engine_api api = {
    sizeof(llmr_engine_api), LLMR_ENGINE_ABI_VERSION, e_describe, e_estimate, e_load, e_unload,
    e_session_create, e_session_destroy, e_generate, e_cancel, e_stats,
};

extern "C" LLMR_ENGINE_EXPORT const llmr_engine_api *llmr_engine_get_api(uint32_t host_abi_version) {
    return LLMR_ENGINE_ABI_MAJOR_OF(host_abi_version) == LLMR_ENGINE_ABI_MAJOR ? &api : NULL;
}

extern "C" LLMR_ENGINE_EXPORT llmr_engine_status gptoss_cuda_debug_eval(llmr_engine_session *s, const int32_t *tokens,
                                                                       size_t n, float *logits, float *hidden,
                                                                       float *router_logits, const int32_t *force_topk,
                                                                       char *err, size_t es) {
    if (!s) return bad_args(err, es, "debug_eval: session required");
    return gptoss_session_eval_debug(S(s), tokens, n, logits, hidden, router_logits, force_topk, err, es);
}

extern "C" LLMR_ENGINE_EXPORT llmr_engine_status gptoss_cuda_debug_step(llmr_engine_session *const *s,
                                                                       const int32_t *tokens, int n, float *logits,
                                                                       float *router_logits, char *err, size_t es) {
    if (!s) return bad_args(err, es, "debug_step: sessions required");
    return gptoss_sched_debug_step((gptoss_session *const *)s, tokens, n, logits, router_logits, err, es);
}

extern "C" LLMR_ENGINE_EXPORT llmr_engine_status gptoss_cuda_get_sched_stats(llmr_engine_model *m, gptoss_cuda_sched_stats *out,
                                                                        int reset) {
    if (!m || !out) return LLMR_ENGINE_UNSUPPORTED;
    gptoss_model_sched_stats(M(m), out, reset);
    return LLMR_ENGINE_OK;
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

extern "C" LLMR_ENGINE_EXPORT llmr_engine_status gptoss_cuda_copy_bandwidth(int device, uint64_t bytes, int reps,
                                                                           double *gbps, char *err, size_t es) {
    if (!gbps || reps < 1 || reps > 1000 || bytes < 1024) return bad_args(err, es, "copy_bandwidth: bad arguments");
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float *ms = (float *)calloc((size_t)reps, sizeof(float));
    llmr_engine_status st = LLMR_ENGINE_OK;
    if (!ms) return LLMR_ENGINE_OOM_RAM;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess || cudaMemset(a, 1, bytes) != cudaSuccess) {
        snprintf(err, es, "copy_bandwidth: %s", cudaGetErrorString(cudaGetLastError()));
        st = LLMR_ENGINE_OOM_VRAM;
    }
    for (int i = -2; st == LLMR_ENGINE_OK && i < reps; i++) { /* two warm-up copies */
        float t = 0;
        if (cudaEventRecord(e0) != cudaSuccess || cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
            cudaEventRecord(e1) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&t, e0, e1) != cudaSuccess) {
            snprintf(err, es, "copy_bandwidth: %s", cudaGetErrorString(cudaGetLastError()));
            st = LLMR_ENGINE_INTERNAL;
        }
        if (i >= 0) ms[i] = t;
    }
    if (st == LLMR_ENGINE_OK) {
        qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
        *gbps = 2.0 * (double)bytes / (ms[reps / 2] * 1e-3) / 1e9;
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    free(ms);
    return st;
}
