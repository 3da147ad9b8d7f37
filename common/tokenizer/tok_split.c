/* tok_split.c — a hand-written fast path for the o200k split regex on ASCII text.
 *
 * The PCRE2 JIT call per pre-token was the largest cost of encode (about 60% of its instructions
 * on the mixed bench corpus): most pre-tokens are short ASCII words, numbers, punctuation and
 * spaces, where the regex's answer follows from a few byte classes. tok_split_o200k decides those
 * and returns 0 ("ask PCRE2") whenever a byte >= 0x80 could change the answer, so the regex stays
 * the single source of truth: every non-ASCII case, and every ASCII case this code does not
 * know, goes to PCRE2. tests/unit/test_tokenizer.c (split_fast_path) and
 * tests/fuzz/fuzz_tok_split.c check it against the compiled regex at every offset of the
 * conformance corpus and of random strings.
 *
 * The pattern (gpt-oss o200k_harmony; alternatives are tried in order at one start position):
 *   1 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|…|'d)?
 *   3 \p{N}{1,3}
 *   4  ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   5 \s*[\r\n]+
 *   6 \s+(?!\S)
 *   7 \s+
 * In ASCII, \p{Lu} = A-Z, \p{Ll} = a-z, \p{N} = 0-9, no Lt/Lm/Lo/M, and \s (rewritten by the loader
 * to Unicode White_Space) = \t \n \v \f \r and space. */
#include "common/tokenizer/tok_internal.h"

/* Class of each ASCII byte: U upper, L lower, D digit, N \r or \n, W other white space, P the rest
 * (punctuation, symbols, other controls: [^\s\p{L}\p{N}]). */
static const char CLS[129] =
    "PPPPPPPPPWNWWNPPPPPPPPPPPPPPPPPP"  /* 0x00 - 0x1F: \t=W \n=N \v=W \f=W \r=N */
    "WPPPPPPPPPPPPPPPDDDDDDDDDDPPPPPP"  /* 0x20 - 0x3F */
    "PUUUUUUUUUUUUUUUUUUUUUUUUUUPPPPP"  /* 0x40 - 0x5F */
    "PLLLLLLLLLLLLLLLLLLLLLLLLLLPPPPP"; /* 0x60 - 0x7F */

static inline char cls(uint8_t c) { return c < 0x80 ? CLS[c] : 'H'; }
static inline int is_letter(char k) { return k == 'U' || k == 'L'; }

/* After a word ending at e: the optional contraction (?i:'s|'t|'re|'ve|'m|'ll|'d). Caseless
 * matching also pairs 's' with U+017F, so a non-ASCII byte after the apostrophe is undecided. */
static size_t contraction(const uint8_t *s, size_t n, size_t e) {
    if (e + 1 >= n || s[e] != '\'') return e;
    char k1 = cls(s[e + 1]);
    if (k1 == 'H') return 0;
    if (!is_letter(k1)) return e;
    uint8_t l1 = s[e + 1] | 0x20;
    if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return e + 2;
    if (l1 != 'r' && l1 != 'v' && l1 != 'l') return e;
    if (e + 2 >= n) return e;
    char k2 = cls(s[e + 2]);
    if (k2 == 'H') return 0;
    if (!is_letter(k2)) return e;
    uint8_t l2 = s[e + 2] | 0x20;
    return (l1 == 'l' ? l2 == 'l' : l2 == 'e') ? e + 3 : e;
}

/* Alternatives 1-2 from the first letter j (any prefix character is already behind j): upper
 * case run then lower case run (both ASCII; 1 takes it when lower case letters follow, 2 when
 * not), then a contraction. A non-ASCII byte where the run stops could be a letter or a mark. */
static size_t word(const uint8_t *s, size_t n, size_t j) {
    size_t e = j;
    while (e < n && cls(s[e]) == 'U') e++;
    while (e < n && cls(s[e]) == 'L') e++;
    if (e < n && s[e] >= 0x80) return 0;
    return contraction(s, n, e);
}

/* Alternative 4 from its first [^\s\p{L}\p{N}] character j: the run of them, then [\r\n/]*. */
static size_t punct(const uint8_t *s, size_t n, size_t j) {
    size_t e = j + 1;
    while (e < n && cls(s[e]) == 'P') e++;
    if (e < n && s[e] >= 0x80) return 0; /* non-ASCII punctuation would continue the run */
    while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/')) e++;
    return e;
}

/* Alternatives 5-7 from white space at i (1-4 were ruled out by the caller). */
static size_t space(const uint8_t *s, size_t n, size_t i) {
    size_t r = i, nl = 0; /* nl: one past the last \r or \n, 0 if none */
    for (; r < n; r++) {
        char k = cls(s[r]);
        if (k == 'N') nl = r + 1;
        else if (k != 'W') break;
    }
    if (r < n && s[r] >= 0x80) return 0; /* U+00A0, U+3000, NEL... would continue the run */
    if (nl) return nl;                   /* 5: \s* backs off to the last newline, [\r\n]+ takes it */
    if (r == n) return r;                /* 6: nothing non-space follows */
    return r - i >= 2 ? r - 1 : r;       /* 6: leave one space for the next word; else 7 */
}

size_t tok_split_o200k(const uint8_t *s, size_t n, size_t i) {
    char k = cls(s[i]);
    switch (k) {
    case 'U': case 'L':
        return word(s, n, i);
    case 'D': {
        size_t e = i + 1;
        while (e < n && e < i + 3 && cls(s[e]) == 'D') e++;
        if (e < i + 3 && e < n && s[e] >= 0x80) return 0; /* a non-ASCII digit would continue */
        return e;
    }
    case 'P': case 'W': {
        /* A prefix character for 1-2 (not \r \n), or the start of 4 (P, or a space before P). */
        if (i + 1 < n) {
            char k1 = cls(s[i + 1]);
            if (k1 == 'H') return 0;
            if (is_letter(k1)) return word(s, n, i + 1);
            if (k == 'P') return punct(s, n, i);
            if (s[i] == ' ' && k1 == 'P') return punct(s, n, i + 1);
        } else if (k == 'P') {
            return i + 1;
        }
        return space(s, n, i);
    }
    case 'N':
        return space(s, n, i);
    default:
        return 0;
    }
}
