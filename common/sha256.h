/* sha256.h — streaming SHA-256 (OpenSSL EVP) with lower-case hex output. */
#ifndef LLMR_SHA256_H
#define LLMR_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define LLMR_SHA256_HEX_LEN 64

typedef struct llmr_sha256 llmr_sha256; /* opaque streaming context */

llmr_sha256 *llmr_sha256_create(void);   /* NULL on allocation failure */
void llmr_sha256_update(llmr_sha256 *h, const void *data, size_t len);
/* Writes 64 hex chars + NUL into hex_out; the context is then reset for reuse. */
void llmr_sha256_final(llmr_sha256 *h, char hex_out[LLMR_SHA256_HEX_LEN + 1]);
void llmr_sha256_destroy(llmr_sha256 *h);

/* One-shot over a buffer. */
void llmr_sha256_buf(const void *data, size_t len, char hex_out[LLMR_SHA256_HEX_LEN + 1]);

/* Progress callback for long hashes: bytes done of total. Return non-zero to abort. */
typedef int (*llmr_sha256_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Hashes a whole file. Returns 0, or -1 with the cause (path and errno text) in err. */
int llmr_sha256_file(const char *path, char hex_out[LLMR_SHA256_HEX_LEN + 1], llmr_sha256_progress_fn progress,
                     void *user, char *err, size_t err_size);

#endif
