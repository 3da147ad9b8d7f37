/* tok_utf8.h — UTF-8 classification and lossy conversion for the tokenizer (internal).
 *
 * One definition of "valid UTF-8" (Unicode Table 3-7) and of "maximal subpart" (Unicode's
 * recommended practice for U+FFFD substitution, also used by Rust's String::from_utf8_lossy,
 * Python's errors="replace" and the WHATWG TextDecoder) serves both encode (input sanitizing) and
 * decode (output), so the streaming decoder and the one-shot decoder cannot disagree. */
#ifndef LLMR_TOK_UTF8_H
#define LLMR_TOK_UTF8_H

#include <stddef.h>
#include <stdint.h>

enum { TOK_UTF8_OK = 0, TOK_UTF8_BAD = 1, TOK_UTF8_SHORT = 2 };

/* Classifies the sequence starting at p[0] (n >= 1 bytes available). Returns its length and sets
 * *st: TOK_UTF8_OK (a whole valid character), TOK_UTF8_BAD (the maximal invalid subpart, >= 1 byte,
 * to be replaced by one U+FFFD), or TOK_UTF8_SHORT (all n bytes are a valid but unfinished prefix). */
static inline size_t tok_utf8_next(const uint8_t *p, size_t n, int *st) {
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80) { *st = TOK_UTF8_OK; return 1; }
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else { *st = TOK_UTF8_BAD; return 1; }
    for (size_t i = 1; i <= need; i++) {
        if (i >= n) { *st = TOK_UTF8_SHORT; return n; }
        if (p[i] < lo || p[i] > hi) { *st = TOK_UTF8_BAD; return i; }
        lo = 0x80; hi = 0xBF;
    }
    *st = TOK_UTF8_OK;
    return need + 1;
}

/* Byte offset of the first invalid or truncated sequence in p[0..n), or n when all is valid. */
size_t tok_utf8_valid_prefix(const uint8_t *p, size_t n);

/* Converts in[0..n) into out (capacity >= 3 * n): valid characters are copied; each maximal invalid
 * subpart becomes U+FFFD (lossy) or is copied raw. A valid but unfinished sequence at the end is
 * left unconsumed when !final (its length is returned; at most 3 bytes), and treated as one invalid
 * subpart when final (returns 0). *out_len receives the bytes written. */
size_t tok_utf8_convert(const uint8_t *in, size_t n, int lossy, int final, uint8_t *out,
                        size_t *out_len);

#endif
