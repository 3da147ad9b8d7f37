/* errmsg.h — filling the caller's error buffer.
 *
 * llmr APIs report failures through a caller buffer (char *err, size_t err_size) holding a human
 * message that names the cause. These helpers are the one place that writes it: nothing is written
 * when err is NULL or err_size is 0, and the message is truncated to fit, always NUL-terminated. They
 * return a failure value so a function can end with `return llmr_errf(err, es, "...", ...)`. */
#ifndef LLMR_ERRMSG_H
#define LLMR_ERRMSG_H

#include <stddef.h>

/* Formats the message into err; returns -1. */
int llmr_errf(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Formats the message into err; returns status (for APIs whose failures are status codes). */
int llmr_errf_status(int status, char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
