/* kv_pages.c — KV page pool bookkeeping (see kv_pages.h). A LIFO stack of free page ids (the most
 * recently freed page is reused first: it is the likeliest to still sit in the GPU's L2) plus one
 * "taken" byte per page so a double release is caught instead of corrupting the stack. */
#include "common/kv_pages.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/errmsg.h"

struct llmr_kv_pages {
    pthread_mutex_t mu;
    uint32_t total, page_tokens, n_free;
    int32_t *free_ids;  /* stack: free_ids[0..n_free) */
    unsigned char *taken;
};

const char *llmr_kv_strerror(llmr_kv_status st) {
    switch (st) {
    case LLMR_KV_OK: return "ok";
    case LLMR_KV_EXHAUSTED: return "KV page pool exhausted";
    case LLMR_KV_TOO_LONG: return "sequence longer than its block table";
    case LLMR_KV_INVALID: return "invalid KV page argument";
    }
    return "unknown KV page status";
}

llmr_kv_pages *llmr_kv_pages_create(uint32_t n_pages, uint32_t page_tokens, char *err, size_t es) {
    if (n_pages == 0 || page_tokens == 0 || n_pages > (uint32_t)INT32_MAX) {
        llmr_errf(err, es, "KV page pool: %u pages of %u tokens is not a valid pool", n_pages, page_tokens);
        return NULL;
    }
    llmr_kv_pages *p = calloc(1, sizeof *p);
    if (p) {
        p->free_ids = malloc((size_t)n_pages * sizeof *p->free_ids);
        p->taken = calloc(n_pages, 1);
    }
    if (!p || !p->free_ids || !p->taken) {
        if (p) { free(p->free_ids); free(p->taken); free(p); }
        llmr_errf(err, es, "KV page pool: out of host memory for %u page ids", n_pages);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->total = n_pages;
    p->page_tokens = page_tokens;
    p->n_free = n_pages;
    for (uint32_t i = 0; i < n_pages; i++) p->free_ids[i] = (int32_t)(n_pages - 1 - i); /* page 0 on top */
    return p;
}

void llmr_kv_pages_destroy(llmr_kv_pages *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->mu);
    free(p->free_ids);
    free(p->taken);
    free(p);
}

uint32_t llmr_kv_pages_for(const llmr_kv_pages *p, uint64_t tokens) {
    const uint64_t n = (tokens + p->page_tokens - 1) / p->page_tokens;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

llmr_kv_status llmr_kv_pages_reserve(llmr_kv_pages *p, llmr_kv_table *t, uint64_t tokens, char *err, size_t es) {
    if (!p || !t || (t->cap && !t->pages) || t->n > t->cap)
        return (llmr_kv_status)llmr_errf_status(LLMR_KV_INVALID, err, es, "KV page reserve: invalid pool or table");
    const uint32_t want = llmr_kv_pages_for(p, tokens);
    if (want <= t->n) return LLMR_KV_OK;
    if (want > t->cap)
        return (llmr_kv_status)llmr_errf_status(LLMR_KV_TOO_LONG, err, es,
                                                "%llu positions need %u KV pages of %u tokens; the block table holds %u",
                                                (unsigned long long)tokens, want, p->page_tokens, t->cap);
    const uint32_t more = want - t->n;
    pthread_mutex_lock(&p->mu);
    if (more > p->n_free) {
        const uint32_t nf = p->n_free;
        pthread_mutex_unlock(&p->mu);
        return (llmr_kv_status)llmr_errf_status(LLMR_KV_EXHAUSTED, err, es,
                                                "KV page pool exhausted: %u more pages of %u tokens needed to reach "
                                                "%llu positions, %u of %u free",
                                                more, p->page_tokens, (unsigned long long)tokens, nf, p->total);
    }
    for (uint32_t i = 0; i < more; i++) {
        const int32_t id = p->free_ids[--p->n_free];
        p->taken[id] = 1;
        t->pages[t->n++] = id;
    }
    pthread_mutex_unlock(&p->mu);
    return LLMR_KV_OK;
}

void llmr_kv_pages_release(llmr_kv_pages *p, llmr_kv_table *t) {
    if (!p || !t || !t->pages) return;
    pthread_mutex_lock(&p->mu);
    /* Release in reverse so the stack gives the same pages back in the same order next time. */
    for (uint32_t i = t->n; i-- > 0;) {
        const int32_t id = t->pages[i];
        if (id < 0 || (uint32_t)id >= p->total || !p->taken[id]) continue; /* not ours: never push twice */
        p->taken[id] = 0;
        p->free_ids[p->n_free++] = id;
    }
    pthread_mutex_unlock(&p->mu);
    t->n = 0;
}

uint32_t llmr_kv_pages_free(llmr_kv_pages *p) {
    pthread_mutex_lock(&p->mu);
    const uint32_t n = p->n_free;
    pthread_mutex_unlock(&p->mu);
    return n;
}

uint32_t llmr_kv_pages_total(const llmr_kv_pages *p) { return p->total; }
uint32_t llmr_kv_pages_page_tokens(const llmr_kv_pages *p) { return p->page_tokens; }
