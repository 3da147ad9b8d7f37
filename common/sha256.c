/* sha256.c — see sha256.h. */
#include "common/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct llmr_sha256 { EVP_MD_CTX *ctx; };

llmr_sha256 *llmr_sha256_create(void) {
    llmr_sha256 *h = malloc(sizeof *h);
    if (!h) return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
    }
    return h;
}

void llmr_sha256_update(llmr_sha256 *h, const void *data, size_t len) { EVP_DigestUpdate(h->ctx, data, len); }

void llmr_sha256_final(llmr_sha256 *h, char hex_out[LLMR_SHA256_HEX_LEN + 1]) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(h->ctx, md, &n);
    for (unsigned i = 0; i < 32; i++) snprintf(hex_out + 2 * i, 3, "%02x", md[i]);
    EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void llmr_sha256_destroy(llmr_sha256 *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void llmr_sha256_buf(const void *data, size_t len, char hex_out[LLMR_SHA256_HEX_LEN + 1]) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++) snprintf(hex_out + 2 * i, 3, "%02x", md[i]);
}

int llmr_sha256_file(const char *path, char hex_out[LLMR_SHA256_HEX_LEN + 1], llmr_sha256_progress_fn progress,
                     void *user, char *err, size_t es) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { snprintf(err, es, "%s: %s", path, strerror(errno)); return -1; }
    struct stat sb;
    fstat(fd, &sb);
    llmr_sha256 *h = llmr_sha256_create();
    size_t cap = 4u << 20;
    unsigned char *buf = malloc(cap);
    int rc = -1;
    if (!h || !buf) { snprintf(err, es, "%s: out of memory", path); goto out; }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t done = 0;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0) {
            if (errno == EINTR) continue;
            snprintf(err, es, "%s: read: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) break;
        llmr_sha256_update(h, buf, (size_t)r);
        done += (uint64_t)r;
        if (progress && progress(user, done, (uint64_t)sb.st_size)) { snprintf(err, es, "%s: hashing aborted", path); goto out; }
    }
    llmr_sha256_final(h, hex_out);
    rc = 0;
out:
    free(buf);
    llmr_sha256_destroy(h);
    close(fd);
    return rc;
}
