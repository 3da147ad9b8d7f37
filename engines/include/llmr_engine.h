/* llmr_engine.h — the engine plugin ABI (pure C, versioned).
 *
 * An engine is a shared library plus a manifest.json (schema/engine-manifest.schema.json) in one
 * folder. The node's EngineHost dlopens it and calls the one exported symbol:
 *
 *     const llmr_engine_api *llmr_engine_get_api(uint32_t host_abi_version);
 *
 * The plugin returns its function table, or NULL when the host's ABI major differs from its own.
 * The host in turn refuses a table whose abi_version has another major. Within one major, tables and
 * parameter structs only grow at the end: each begins with struct_size, and a reader touches a field
 * only when struct_size covers it (LLMR_HAS_FIELD). A newer minor therefore adds entries safely.
 *
 * Conventions (see docs/engine-abi.md for the full contract):
 *  - Every function returns llmr_engine_status; results come through *_out parameters, which are
 *    left untouched on failure. Human-readable detail goes to a caller buffer (err, err_size),
 *    always NUL-terminated when err_size > 0.
 *  - Handles are opaque. model: created by load, destroyed by unload. session: created by
 *    session_create, destroyed by session_destroy (which returns its KV memory). Destroy functions
 *    accept NULL. A model must outlive its sessions.
 *  - Strings and arrays passed in are borrowed for the duration of the call only.
 *  - Threading: load/unload/session_create/session_destroy are called by one host thread at a time
 *    per model. generate may run concurrently on different sessions of one model from different
 *    threads (the engine may batch them into one step). cancel may be called from any thread at any
 *    time while generate runs on that session. stats may be called from any thread.
 */
#ifndef LLMR_ENGINE_H
#define LLMR_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLMR_ENGINE_ABI_MAJOR 1
#define LLMR_ENGINE_ABI_MINOR 1 /* 1.1: llmr_generate_request.on_logprobs / top_logprobs */
#define LLMR_ENGINE_ABI_VERSION ((uint32_t)((LLMR_ENGINE_ABI_MAJOR << 16) | LLMR_ENGINE_ABI_MINOR))
#define LLMR_ENGINE_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define LLMR_ENGINE_ABI_MINOR_OF(v) ((uint32_t)(v) & 0xffffu)

/* True when a struct of reported size `size` contains member `field` of `type`. */
#define LLMR_HAS_FIELD(ptr, type, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* The ten coarse error codes (T109). X-macro: code, name, description. */
#define LLMR_ENGINE_STATUS_LIST(X) \
    X(LLMR_ENGINE_OK,             0, "ok") \
    X(LLMR_ENGINE_OOM_VRAM,       1, "not enough GPU memory") \
    X(LLMR_ENGINE_OOM_RAM,        2, "not enough host memory") \
    X(LLMR_ENGINE_MODEL_CORRUPT,  3, "model files are corrupt or inconsistent") \
    X(LLMR_ENGINE_TIMEOUT,        4, "timed out") \
    X(LLMR_ENGINE_CANCELLED,      5, "cancelled") \
    X(LLMR_ENGINE_UNSUPPORTED,    6, "unsupported model, parameter or device") \
    X(LLMR_ENGINE_INTERNAL,       7, "internal engine error") \
    X(LLMR_ENGINE_ABI_MISMATCH,   8, "engine ABI version mismatch") \
    X(LLMR_ENGINE_LOAD_FAILED,    9, "model load failed")

typedef enum llmr_engine_status {
#define LLMR_X_(name, value, text) name = value,
    LLMR_ENGINE_STATUS_LIST(LLMR_X_)
#undef LLMR_X_
} llmr_engine_status;

/* Static description of a status code. Never NULL; unknown codes give "unknown status". */
static inline const char *llmr_engine_strerror(llmr_engine_status s) {
    switch (s) {
#define LLMR_X_(name, value, text) case name: return text;
        LLMR_ENGINE_STATUS_LIST(LLMR_X_)
#undef LLMR_X_
    }
    return "unknown status";
}

/* Stable lower-case name of a status code ("oom_vram", ...), for logs and JSON. */
static inline const char *llmr_engine_status_name(llmr_engine_status s) {
    static const char *const names[] = {"ok", "oom_vram", "oom_ram", "model_corrupt", "timeout",
                                         "cancelled", "unsupported", "internal", "abi_mismatch",
                                         "load_failed"};
    return ((unsigned)s < sizeof names / sizeof names[0]) ? names[s] : "unknown";
}

typedef struct llmr_engine_model llmr_engine_model;     /* opaque: a loaded model */
typedef struct llmr_engine_session llmr_engine_session; /* opaque: one conversation's KV state */

/* Log levels for the host's log service (same values as common/log.h). */
#ifndef LLMR_LOG_DEBUG
#define LLMR_LOG_DEBUG 0
#define LLMR_LOG_INFO 1
#define LLMR_LOG_WARN 2
#define LLMR_LOG_ERROR 3
#endif

/* Services the host offers a plugin (passed in llmr_load_params; may be NULL: then log to stderr). */
typedef struct llmr_host_api {
    uint32_t struct_size;
    void *host;                                                 /* first argument of each service */
    void (*log)(void *host, int level, const char *msg);        /* one line, no trailing newline */
} llmr_host_api;

/* What the node decided to run: built from the registered format and config.json (never metadata.json). */
typedef struct llmr_model_descriptor {
    uint32_t struct_size;
    const char *id;            /* "openai/gpt-oss-20b" */
    const char *format;        /* "safetensors" | "gguf" */
    const char *runtime;       /* "gptoss", or "unknown" */
    const char *architecture;  /* config.json architectures[0], e.g. "GptOssForCausalLM" */
    const char *model_dir;     /* absolute path of the verified snapshot (config.json, shards, index) */
    const char *artifact_path; /* absolute path of an official artifact chosen for this engine, or NULL */
} llmr_model_descriptor;

typedef struct llmr_load_params {
    uint32_t struct_size;
    int32_t device;               /* GPU ordinal; -1 = CPU */
    uint64_t vram_budget_bytes;   /* the engine must not plan beyond this; 0 = no limit */
    uint32_t max_context;         /* longest sequence a session may hold; 0 = engine default */
    uint32_t max_sessions;        /* sessions the engine should plan KV memory for; 0 = default */
    const llmr_host_api *host;    /* may be NULL */
} llmr_load_params;

typedef struct llmr_session_params {
    uint32_t struct_size;
    uint32_t max_context;         /* 0 = the model's load-time max_context */
} llmr_session_params;

typedef struct llmr_sampling_params {
    uint32_t struct_size;
    float temperature;            /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;                /* <= 0: off */
    float top_p;                  /* >= 1 or <= 0: off */
    float min_p;                  /* <= 0: off */
    uint64_t seed;                /* same seed, same prompt, same engine build -> same tokens */
    float frequency_penalty;      /* OpenAI semantics, over generated tokens */
    float presence_penalty;
} llmr_sampling_params;

/* Why generate returned. */
typedef enum llmr_finish_reason {
    LLMR_FINISH_NONE = 0,   /* not finished (only seen on error) */
    LLMR_FINISH_STOP = 1,   /* a stop token id was produced, or on_token asked to stop */
    LLMR_FINISH_LENGTH = 2, /* max_tokens reached, or the session's context is full */
    LLMR_FINISH_CANCELLED = 3,
} llmr_finish_reason;

/* Called once per generated token, as soon as it is produced (T111). A stop token is reported too
 * (the caller decides whether to show it). Return 0 to continue, non-zero to stop generation now
 * (finish STOP). Runs on the generating thread; must not call back into the engine for this session. */
typedef int (*llmr_token_cb)(void *user, int32_t token);

/* Log-probabilities of one generated token (ABI 1.1), for OpenAI's `logprobs`. They are the model's
 * own distribution: log_softmax of the raw logits the token was drawn from, before penalties,
 * temperature, top_k, top_p and min_p (what a caller can compare between runs and engines; NaN logits
 * count as -inf). Alternatives are the most likely ids, most likely first, ties to the lower id. */
#define LLMR_MAX_TOP_LOGPROBS 20
typedef struct llmr_token_logprobs {
    int32_t token;                            /* the generated token (the one on_token receives next) */
    float logprob;                            /* its log-probability (<= 0; -inf when its logit is) */
    uint32_t n_top;                           /* alternatives below: the request's top_logprobs, capped by the vocab */
    int32_t top_ids[LLMR_MAX_TOP_LOGPROBS];
    float top_logprobs[LLMR_MAX_TOP_LOGPROBS];
} llmr_token_logprobs;

/* Called right before on_token with that token's log-probabilities; same thread, same user. `lp` is
 * borrowed for the call. */
typedef void (*llmr_logprobs_cb)(void *user, const llmr_token_logprobs *lp);

typedef struct llmr_generate_request {
    uint32_t struct_size;
    const int32_t *tokens;        /* tokens to append to the session before generating (the prompt,
                                     or the next turn); the session keeps its KV across calls */
    size_t n_tokens;
    uint32_t max_tokens;          /* tokens to generate; 0 = only evaluate `tokens` */
    const int32_t *stop_ids;      /* generation stops after producing one of these */
    size_t n_stop_ids;
    llmr_sampling_params sampling;
    float *logits_out;            /* optional: receives the logits (vocab floats) after `tokens` are
                                     evaluated, i.e. the distribution of the first generated token */
    /* ABI 1.1 (an engine of 1.0 never reads them: the host refuses such requests for it) */
    llmr_logprobs_cb on_logprobs; /* optional: each generated token's log-probabilities, before its on_token */
    uint32_t top_logprobs;        /* alternatives reported with each, 0..LLMR_MAX_TOP_LOGPROBS (more: UNSUPPORTED) */
} llmr_generate_request;

typedef struct llmr_generate_result {
    uint32_t struct_size;
    llmr_finish_reason finish;
    uint32_t n_prompt;            /* tokens evaluated from the request */
    uint32_t n_generated;         /* tokens passed to on_token */
    uint32_t n_context;           /* tokens now held in the session */
} llmr_generate_result;

typedef struct llmr_engine_info {
    uint32_t struct_size;
    const char *id;               /* equals the manifest id, e.g. "gptoss_cuda" */
    const char *version;          /* semver of the plugin */
    const char *description;
    uint32_t abi_version;         /* LLMR_ENGINE_ABI_VERSION the plugin was built with */
    int32_t uses_gpu;             /* 1 if it needs a GPU: the host then checks estimate_vram against
                                     the device's free memory before load */
} llmr_engine_info;

typedef struct llmr_engine_stats {
    uint32_t struct_size;
    uint64_t vram_bytes;          /* device memory held by the model and its sessions */
    uint64_t ram_bytes;           /* host memory held */
    uint32_t active_sessions;
    uint64_t tokens_generated;    /* since load */
    uint32_t vocab_size;
    uint32_t max_context;
} llmr_engine_stats;

typedef struct llmr_engine_api {
    uint32_t struct_size;         /* sizeof(llmr_engine_api) as built by the plugin */
    uint32_t abi_version;         /* LLMR_ENGINE_ABI_VERSION */

    /* Fills *out with static information. Always OK. */
    llmr_engine_status (*describe)(llmr_engine_info *out);

    /* Bytes of device memory a load with these params would need (weights + KV for max_sessions
     * at max_context + workspace). Reads only headers; allocates nothing on the device. */
    llmr_engine_status (*estimate_vram)(const llmr_model_descriptor *desc, const llmr_load_params *params,
                                        uint64_t *bytes_out, char *err, size_t err_size);

    /* Loads the model. On OOM_VRAM the message states bytes needed and free, and nothing was allocated. */
    llmr_engine_status (*load)(const llmr_model_descriptor *desc, const llmr_load_params *params,
                               llmr_engine_model **model_out, char *err, size_t err_size);

    /* Frees the model. All its sessions must have been destroyed. Accepts NULL. */
    void (*unload)(llmr_engine_model *model);

    /* A new session with its own KV state (T108). */
    llmr_engine_status (*session_create)(llmr_engine_model *model, const llmr_session_params *params,
                                         llmr_engine_session **session_out, char *err, size_t err_size);

    /* Frees the session and returns its KV memory. Accepts NULL. Not while generate runs on it. */
    void (*session_destroy)(llmr_engine_session *session);

    /* Appends req->tokens to the session, then samples up to max_tokens tokens, calling on_token once
     * per token as it is produced. Returns CANCELLED if cancel() was called (the session stays valid
     * and holds what was evaluated), TIMEOUT never (the host's watchdog cancels instead). */
    llmr_engine_status (*generate)(llmr_engine_session *session, const llmr_generate_request *req,
                                   llmr_token_cb on_token, void *user, llmr_generate_result *result_out,
                                   char *err, size_t err_size);

    /* Asks a running generate on this session to return CANCELLED soon. Thread-safe; no-op when idle.
     * The flag is cleared when the next generate starts. */
    void (*cancel)(llmr_engine_session *session);

    /* Current resource use of the model. Thread-safe. */
    llmr_engine_status (*stats)(llmr_engine_model *model, llmr_engine_stats *out);
} llmr_engine_api;

/* Size of an ABI 1.0 function table (every entry up to and including stats): the host refuses a
 * table whose struct_size is smaller. Entries added by later minors lie beyond it. */
#define LLMR_ENGINE_API_V1_0_SIZE (offsetof(llmr_engine_api, stats) + sizeof(void (*)(void)))

/* The one exported symbol of a plugin. */
#define LLMR_ENGINE_ENTRY_SYMBOL "llmr_engine_get_api"
typedef const llmr_engine_api *(*llmr_engine_get_api_fn)(uint32_t host_abi_version);

#if defined(_WIN32)
#define LLMR_ENGINE_EXPORT __declspec(dllexport)
#else
#define LLMR_ENGINE_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif
#endif /* LLMR_ENGINE_H */
