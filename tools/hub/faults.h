/* faults.h — fault injection for llmr-hub, so tests can simulate a bad hub.
 *
 * A fault is "KIND:GLOB[@N]": GLOB (fnmatch, '*' also matches '/') is matched against
 * "org/name/path/in/repo"; @N makes the fault fire only for the first N matching requests
 * (default: every time). Several faults are separated by ';' (and --fault may be repeated).
 *   corrupt:GLOB        GET of the file serves its bytes with one byte flipped (the one at
 *                       size/2, or the first byte of the requested range if that lies after it);
 *                       the listing still shows the true sha256, so a verifying client must notice.
 *   drop:GLOB           GET sends the headers with the full Content-Length, then half of the
 *                       requested bytes, then closes the connection (a resumable interruption).
 *   hide:GLOB           the file is left out of tree listings and model-info siblings (it is still
 *                       served by resolve).
 *   ignore-range:GLOB   Range headers are ignored: 200 with the whole file.
 *   status=CODE:GLOB    resolve (GET and HEAD) answers CODE (e.g. 503, 429, 500) with a JSON error.
 */
#ifndef LLMR_HUB_FAULTS_H
#define LLMR_HUB_FAULTS_H

#include <stddef.h>

typedef enum { FAULT_CORRUPT, FAULT_DROP, FAULT_HIDE, FAULT_IGNORE_RANGE, FAULT_STATUS } fault_kind;

typedef struct hub_fault {
    fault_kind kind;
    int status;        /* FAULT_STATUS */
    char glob[512];
    int remaining;     /* -1 = unlimited */
} hub_fault;

typedef struct hub_faults {
    hub_fault v[64];
    int n;
} hub_faults;

/* Adds the faults in spec (';'-separated). 0, or -1 with the bad part named in err. */
int hub_faults_parse(hub_faults *f, const char *spec, char *err, size_t err_size);

/* The first fault of kind k matching repo/path that still has firings left (consuming one), or
 * NULL. peek: match without consuming. */
const hub_fault *hub_faults_match(hub_faults *f, fault_kind k, const char *repo, const char *path, int peek);

#endif
