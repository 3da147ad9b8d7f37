/* kv_pages.h — a fixed pool of KV-cache pages and the block tables of the sequences that use it.
 *
 * An engine sizes one pool per model at load (max_sessions x max_context worth of pages) and keeps the
 * page storage itself (on the GPU); this module only decides which page ids belong to whom. A
 * sequence owns a block table: an array of page ids, entry i holding positions
 * [i * page_tokens, (i + 1) * page_tokens). Tables only grow while a sequence lives (so entries already
 * copied to a device never change) and are released as a whole when it ends.
 *
 * Thread safety: every call may come from any thread (sessions are destroyed on the host's threads
 * while an engine thread grows others); one mutex guards the free list. A table itself belongs to one
 * sequence and must not be grown or released from two threads at once. */
#ifndef LLMR_KV_PAGES_H
#define LLMR_KV_PAGES_H

#include <stddef.h>
#include <stdint.h>

typedef enum llmr_kv_status {
    LLMR_KV_OK = 0,
    LLMR_KV_EXHAUSTED, /* not enough free pages (nothing was taken) */
    LLMR_KV_TOO_LONG,  /* more positions than the table has room for */
    LLMR_KV_INVALID    /* bad argument, or a page id that is not taken (a bug in the caller) */
} llmr_kv_status;

typedef struct llmr_kv_pages llmr_kv_pages;

/* A sequence's block table: pages[0..n) in position order; cap entries of room (caller's storage). */
typedef struct llmr_kv_table {
    int32_t *pages;
    uint32_t n, cap;
} llmr_kv_table;

/* Short fixed description of a status ("KV page pool exhausted", ...). */
const char *llmr_kv_strerror(llmr_kv_status st);

/* A pool of n_pages pages of page_tokens positions each (both > 0), all free. NULL on failure with
 * the cause in err. */
llmr_kv_pages *llmr_kv_pages_create(uint32_t n_pages, uint32_t page_tokens, char *err, size_t err_size);

/* Frees the pool (NULL is fine). Tables still holding pages simply point at nothing afterwards. */
void llmr_kv_pages_destroy(llmr_kv_pages *p);

/* Pages needed to hold `tokens` positions (ceil(tokens / page_tokens)). */
uint32_t llmr_kv_pages_for(const llmr_kv_pages *p, uint64_t tokens);

/* Grows t so it covers positions [0, tokens): takes the missing pages from the free list, all or
 * nothing. EXHAUSTED names the pages needed and free, TOO_LONG the table's room, in err. */
llmr_kv_status llmr_kv_pages_reserve(llmr_kv_pages *p, llmr_kv_table *t, uint64_t tokens, char *err,
                                     size_t err_size);

/* Returns every page of t to the pool and empties it (t->n = 0). A NULL t or empty table is fine. */
void llmr_kv_pages_release(llmr_kv_pages *p, llmr_kv_table *t);

/* Pages free now / in the pool / positions per page. */
uint32_t llmr_kv_pages_free(llmr_kv_pages *p);
uint32_t llmr_kv_pages_total(const llmr_kv_pages *p);
uint32_t llmr_kv_pages_page_tokens(const llmr_kv_pages *p);

#endif
