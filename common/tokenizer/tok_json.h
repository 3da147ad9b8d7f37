/* tok_json.h — a small single-pass JSON reader for the big parts of tokenizer.json (internal).
 *
 * Why: jansson builds a DOM for the 27 MB gpt-oss file in about a second; loading must take
 * < 300 ms. The vocab (200k string->int pairs) and merges (446k pairs) are read straight into the
 * tokenizer's arrays by this cursor-based reader; every other value is skipped over and its span
 * handed to jansson, which is fast for small values. The reader is strict JSON (RFC 8259) for what
 * it reads; spans it skips are validated by jansson afterwards.
 *
 * Every function returns 0 on success or -1 after writing a message naming the file, the line and
 * column, and what was expected where (the `ctx` argument, a JSON path such as "model.vocab"). */
#ifndef LLMR_TOK_JSON_H
#define LLMR_TOK_JSON_H

#include <stddef.h>

typedef struct tj_buf { char *p; size_t len, cap; } tj_buf; /* growable; p NUL-terminated */

typedef struct tok_json {
    const char *base, *p, *end;
    const char *name;        /* file name for messages */
    char *err; size_t err_size;
    int oom;                 /* set when a failure was out-of-memory */
} tok_json;

void tj_init(tok_json *j, const char *buf, size_t len, const char *name, char *err,
             size_t err_size);

/* Skips whitespace; returns the next byte (not consumed) or -1 at the end of input. */
int tj_peek(tok_json *j);

/* Consumes the byte c (after whitespace), or fails naming ctx. */
int tj_expect(tok_json *j, char c, const char *ctx);

/* After a member or element: consumes ',' (returns 1: more follow) or `close` (returns 0), else -1. */
int tj_next(tok_json *j, char close, const char *ctx);

/* Reads a string, appending its unescaped bytes to out (which stays NUL-terminated). */
int tj_string(tok_json *j, tj_buf *out, const char *ctx);

/* Reads an integer in [0, max]. */
int tj_uint(tok_json *j, long long max, long long *v, const char *ctx);

/* Skips one value of any type; *start and *len receive its span (for jansson). */
int tj_skip(tok_json *j, const char **start, size_t *len, const char *ctx);

/* Writes a message "name: line L col C: fmt..." (position of the cursor) and returns -1. */
int tj_fail(tok_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends n bytes to b (keeps it NUL-terminated). Returns 0 or -1 on out-of-memory. */
int tj_buf_add(tj_buf *b, const char *s, size_t n);
void tj_buf_free(tj_buf *b);

#endif
