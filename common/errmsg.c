/* errmsg.c — see errmsg.h. */
#include "common/errmsg.h"

#include <stdarg.h>
#include <stdio.h>

static void verrf(char *err, size_t es, const char *fmt, va_list ap) {
    if (err && es) vsnprintf(err, es, fmt, ap);
}

int llmr_errf(char *err, size_t es, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verrf(err, es, fmt, ap);
    va_end(ap);
    return -1;
}

int llmr_errf_status(int status, char *err, size_t es, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verrf(err, es, fmt, ap);
    va_end(ap);
    return status;
}
