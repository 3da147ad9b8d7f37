/* log.h — process-wide logging for llmr binaries and plugins.
 *
 * One line per event on stderr: "2026-11-22T10:00:00.123Z INFO  router: message".
 * With JSON lines enabled each event is {"ts":…,"level":…,"component":…,"msg":…}.
 * Thread-safe; a line is written with one write(2) so lines from threads never interleave. */
#ifndef LLMR_LOG_H
#define LLMR_LOG_H

#include <stdarg.h>

#ifndef LLMR_LOG_DEBUG
#define LLMR_LOG_DEBUG 0
#define LLMR_LOG_INFO 1
#define LLMR_LOG_WARN 2
#define LLMR_LOG_ERROR 3
#endif

/* Sets the component name shown on each line (copied, at most 31 chars), the minimum level, and
 * whether lines are JSON. May be called again at any time. Defaults: "llmr", INFO, text. */
void llmr_log_init(const char *component, int min_level, int json_lines);

/* Parses "debug|info|warn|error" (case-insensitive). Returns the level, or -1 if unknown. */
int llmr_log_level_parse(const char *name);

int llmr_log_enabled(int level);
void llmr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void llmr_vlog(int level, const char *fmt, va_list ap);

#define log_debug(...) llmr_log(LLMR_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  llmr_log(LLMR_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  llmr_log(LLMR_LOG_WARN, __VA_ARGS__)
#define log_error(...) llmr_log(LLMR_LOG_ERROR, __VA_ARGS__)

#endif
