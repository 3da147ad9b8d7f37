/* path_safety.c — see path_safety.h. */
#include "common/path_safety.h"

#include <stdio.h>
#include <string.h>

static int reject(char *err, size_t es, const char *why) {
    if (err && es) snprintf(err, es, "%s", why);
    return 0;
}

int llmr_path_is_safe_n(const char *name, size_t len, char *err, size_t es) {
    if (!name || len == 0) return reject(err, es, "empty file name");
    if (len > LLMR_PATH_MAX_LEN) return reject(err, es, "file name longer than 1024 bytes");
    if (name[0] == '/') return reject(err, es, "absolute path");
    size_t seg_start = 0;
    for (size_t i = 0; i <= len; i++) {
        unsigned char c = i < len ? (unsigned char)name[i] : '/';
        if (i < len) {
            if (c == 0) return reject(err, es, "NUL byte in file name");
            if (c == '\\') return reject(err, es, "backslash in file name");
            if (c < 0x20 || c == 0x7f) return reject(err, es, "control character in file name");
        }
        if (c != '/') continue;
        size_t seg = i - seg_start;
        if (seg == 0) return reject(err, es, "empty path segment");
        if (seg == 1 && name[seg_start] == '.') return reject(err, es, "'.' path segment");
        if (seg == 2 && name[seg_start] == '.' && name[seg_start + 1] == '.') return reject(err, es, "'..' path segment");
        seg_start = i + 1;
    }
    return 1;
}

int llmr_path_is_safe(const char *name, char *err, size_t es) {
    return llmr_path_is_safe_n(name, name ? strlen(name) : 0, err, es);
}
