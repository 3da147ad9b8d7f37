// fuzz-sources: router/validate.c router/hub.c router/artifacts.c router/template_check.c router/chat_prompt.c router/template/*.c common/path_safety.c common/sha256.c common/hub_client.c common/http_client.c common/log.c
/* libFuzzer target: model registration on hostile input. The input is split at NUL bytes into a
 * request body, config.json, model.safetensors.index.json, tokenizer_config.json,
 * chat_template.jinja and a supported_models.json; an in-memory hub serves them (the listing holds
 * every shard the index names, so deep paths are reached). Any crash, leak or sanitizer report is a
 * bug; every input must end in a verdict. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router/template_check.h"
#include "router/validate.h"

typedef struct { const char *name; const char *data; size_t len; } part;
static part g_parts[6];

static int f_list(void *ctx, const char *repo, const char *rev, router_hub_listing *out, char *err, size_t es) {
    (void)ctx, (void)rev, (void)err, (void)es;
    memset(out, 0, sizeof *out);
    memcpy(out->commit, "0123456789abcdef0123456789abcdef01234567", 41);
    if (strcmp(repo, "fz/model") && strcmp(repo, "openai/other")) return ROUTER_HUB_ENOTFOUND;
    for (int i = 1; i <= 4; i++)
        if (g_parts[i].len) router_hub_listing_add(out, g_parts[i].name, g_parts[i].len, "");
    router_hub_listing_add(out, "tokenizer.json", 10, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    router_hub_listing_add(out, "model.safetensors", 10, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    router_hub_listing_add(out, "metal/model.bin", 10, "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
    /* every shard the index names is in the listing, when the index parses */
    json_t *idx = json_loadb(g_parts[2].data, g_parts[2].len, 0, NULL);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(idx, "weight_map"), k, v)
        if (json_is_string(v) && !router_hub_listing_find(out, json_string_value(v)))
            router_hub_listing_add(out, json_string_value(v), 5, "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
    json_decref(idx);
    return 0;
}

static int f_fetch(void *ctx, const char *repo, const char *commit, const char *path, size_t max, char **body, size_t *len,
                   char *err, size_t es) {
    (void)ctx, (void)repo, (void)commit, (void)max;
    for (int i = 1; i <= 4; i++)
        if (!strcmp(path, g_parts[i].name)) {
            *body = malloc(g_parts[i].len + 1);
            memcpy(*body, g_parts[i].data, g_parts[i].len);
            (*body)[g_parts[i].len] = 0;
            *len = g_parts[i].len;
            return 0;
        }
    snprintf(err, es, "absent");
    return ROUTER_HUB_ENOTFOUND;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *names[] = {"body", "config.json", "model.safetensors.index.json", "tokenizer_config.json",
                                  "chat_template.jinja", "supported_models.json"};
    const char *p = (const char *)data, *end = p + size;
    for (int i = 0; i < 6; i++) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        g_parts[i] = (part){names[i], p, z ? (size_t)(z - p) : (size_t)(end - p)};
        p = z ? z + 1 : end;
    }
    char err[1024];
    router_artifacts *arts = router_artifacts_parse("fuzz", g_parts[5].data, g_parts[5].len, "openai/*,fz/*", err, sizeof err);
    json_t *body = json_loadb(g_parts[0].data, g_parts[0].len, JSON_DECODE_ANY, NULL);
    router_register_req req;
    router_verdict v = {0};
    if (body && router_register_parse(body, &req, &v) == 0) {
        router_verdict_free(&v);
        free(req.repo);
        req.repo = strdup("fz/model"); /* whatever name was given, reach the validator */
        router_hub hub = {.ctx = NULL, .endpoint = "http://hub", .list = f_list, .fetch = f_fetch};
        router_validate_env env = {.hub = &hub, .artifacts = arts, .check_template = router_template_check};
        router_validate_register(&env, &req, &v);
        if (v.status == 201) json_decref(router_manifest_from_record(v.record));
        router_register_req_free(&req);
    }
    router_verdict_free(&v);
    json_decref(body);
    router_artifacts_destroy(arts);
    return 0;
}
