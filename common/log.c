/* log.c — see log.h. */
#include "common/log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char g_component[32] = "llmr";
static int g_min_level = LLMR_LOG_INFO;
static int g_json;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void llmr_log_init(const char *component, int min_level, int json_lines) {
    if (component) snprintf(g_component, sizeof g_component, "%s", component);
    g_min_level = min_level;
    g_json = json_lines;
}

int llmr_log_level_parse(const char *name) {
    static const char *const lower[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (name && strcasecmp(name, lower[i]) == 0) return i;
    if (name && strcasecmp(name, "warning") == 0) return LLMR_LOG_WARN;
    return -1;
}

int llmr_log_enabled(int level) { return level >= g_min_level; }

/* Appends s to buf as the inside of a JSON string; returns the new length (bounded by cap). */
static size_t json_escape_into(char *buf, size_t len, size_t cap, const char *s) {
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { buf[len++] = '\\'; buf[len++] = (char)c; }
        else if (c == '\n') { buf[len++] = '\\'; buf[len++] = 'n'; }
        else if (c == '\t') { buf[len++] = '\\'; buf[len++] = 't'; }
        else if (c < 0x20) len += (size_t)snprintf(buf + len, cap - len, "\\u%04x", c);
        else buf[len++] = (char)c;
    }
    return len;
}

void llmr_vlog(int level, const char *fmt, va_list ap) {
    if (level < g_min_level) return;
    if (level < 0) level = 0;
    if (level > 3) level = 3;
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t ml = strlen(msg);
    while (ml > 0 && (msg[ml - 1] == '\n' || msg[ml - 1] == '\r')) msg[--ml] = 0;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    size_t wl = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wl, sizeof when - wl, ".%03ldZ", ts.tv_nsec / 1000000);

    char line[8192];
    size_t len;
    if (g_json) {
        len = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"%s\",\"msg\":\"",
                               when, level_names[level], g_component);
        len = json_escape_into(line, len, sizeof line - 3, msg);
        memcpy(line + len, "\"}\n", 3);
        len += 3;
    } else {
        len = (size_t)snprintf(line, sizeof line, "%s %-5s %s: %s\n", when, level_names[level], g_component, msg);
        if (len >= sizeof line) { len = sizeof line - 1; line[len - 1] = '\n'; }
    }
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log write */
}

void llmr_log(int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    llmr_vlog(level, fmt, ap);
    va_end(ap);
}
