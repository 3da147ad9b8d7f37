/* path_safety.h — checks a relative file name that came from the network (hub listings, manifests,
 * index weight_maps) before it is joined to a local directory.
 *
 * Accepted: "a/b/c.safetensors"-style relative paths of printable bytes. Rejected, each with a message
 * naming the rule: empty; longer than LLMR_PATH_MAX_LEN; absolute ("/x"); containing a NUL byte, a
 * backslash or a control character; an empty segment ("a//b", "a/", "/"); a "." or ".." segment. */
#ifndef LLMR_PATH_SAFETY_H
#define LLMR_PATH_SAFETY_H

#include <stddef.h>

#define LLMR_PATH_MAX_LEN 1024

/* Returns 1 if name[0..len) is a safe relative path, else 0 with the reason in err. */
int llmr_path_is_safe_n(const char *name, size_t len, char *err, size_t err_size);
/* Same for a NUL-terminated name. */
int llmr_path_is_safe(const char *name, char *err, size_t err_size);

#endif
