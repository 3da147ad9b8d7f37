/* json_check.h — is this file valid JSON? Answered fast, without building a tree.
 *
 * ModelStorage must check that tokenizer.json parses; for gpt-oss that is a 27 MB file, which
 * jansson turns into a DOM in seconds on a busy machine only to throw it away. This checker walks the
 * bytes once (RFC 8259: objects, arrays, strings with escapes and \u surrogate pairs, UTF-8 well-
 * formedness, numbers, literals, nothing after the value but whitespace), nesting at most
 * LLMR_JSON_CHECK_MAX_DEPTH deep, and reports where it stopped. Pure functions; thread-safe. */
#ifndef LLMR_NODE_JSON_CHECK_H
#define LLMR_NODE_JSON_CHECK_H

#include <stddef.h>

#define LLMR_JSON_CHECK_MAX_DEPTH 512

/* 0 when buf[0..len) is one valid JSON value, else -1 with "line L column C: why" in err. */
int llmr_json_check(const char *buf, size_t len, char *err, size_t err_size);

/* Same for a file (read through mmap). -1 with "PATH: why" (I/O errors included) in err. */
int llmr_json_check_file(const char *path, char *err, size_t err_size);

#endif
