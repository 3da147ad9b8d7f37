/* tok_utf8.c — see tok_utf8.h. */
#include "common/tokenizer/tok_utf8.h"

#include <string.h>

size_t tok_utf8_valid_prefix(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path: 8 bytes at a time while no high bit is set. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (p[i] < 0x80) { i++; continue; }
        int st;
        size_t l = tok_utf8_next(p + i, n - i, &st);
        if (st != TOK_UTF8_OK) return i;
        i += l;
    }
    return n;
}

size_t tok_utf8_convert(const uint8_t *in, size_t n, int lossy, int final, uint8_t *out,
                        size_t *out_len) {
    size_t i = 0, o = 0;
    while (i < n) {
        int st;
        size_t l = tok_utf8_next(in + i, n - i, &st);
        if (st == TOK_UTF8_SHORT && !final) {
            *out_len = o;
            return n - i;
        }
        if (st == TOK_UTF8_OK || !lossy) {
            memcpy(out + o, in + i, l);
            o += l;
        } else {
            out[o++] = 0xEF; out[o++] = 0xBF; out[o++] = 0xBD; /* U+FFFD */
        }
        i += l;
    }
    *out_len = o;
    return 0;
}
