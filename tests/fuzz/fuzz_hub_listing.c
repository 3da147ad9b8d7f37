/* libFuzzer target: the hub's tree-listing page parser and its Link-header pagination parser (both
 * static in hub_client.c, hence the #include) never crash, leak or hang; every file they accept has a
 * safe relative path and well-formed hashes, and a "next" link they accept stays on the hub's origin.
 * Input: TREE_PAGE_JSON [\0 LINK_HEADER].
 *   make fuzz && build/fuzz/fuzz_hub_listing -max_total_time=60 tests/fuzz/corpus/hub_listing */
// fuzz-sources: common/http_client.c common/path_safety.c common/sha256.c
#include "common/hub_client.c"

#include <stdint.h>

static int lower_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[n] == 0;
}

static void check_page(const char *body) {
    llmr_hub_file *files = NULL;
    size_t n = 0, cap = 0;
    char err[512];
    err[0] = 0;
    llmr_hub_status st = parse_tree_page(body, "https://hub.test/api/x", &files, &n, &cap, err, sizeof err);
    if (st != LLMR_HUB_OK && err[0] == 0) abort();
    for (size_t i = 0; i < n; i++) {
        const llmr_hub_file *f = &files[i];
        if (!f->path || !llmr_path_is_safe(f->path, NULL, 0)) abort();
        if (f->oid[0] && !lower_hex(f->oid, 40)) abort();
        if (f->is_lfs ? !lower_hex(f->sha256, 64) : f->sha256[0] != 0) abort();
    }
    llmr_hub_files_free(files, n); /* on failure too: what a page appended before the bad entry */
}

static void check_link(const char *link) {
    char origin[] = "https://hub.test";
    llmr_hub h = {.endpoint = origin, .origin = origin};
    int bad = 0;
    char *u = next_link(&h, link, &bad);
    if (u && !bad && (strncasecmp(u, origin, strlen(origin)) != 0 || (u[strlen(origin)] != '/' && u[strlen(origin)])))
        abort();
    free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    check_page(buf);
    size_t first = strlen(buf);
    if (first < size) check_link(buf + first + 1);
    free(buf);
    return 0;
}
