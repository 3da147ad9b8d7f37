/* template_check.h — the chat-template parse check used at registration (validate.h's
 * router_template_check_fn), backed by the Jinja engine (router/chat_prompt.h). */
#ifndef ROUTER_TEMPLATE_CHECK_H
#define ROUTER_TEMPLATE_CHECK_H

#include <stddef.h>

/* Parses src[0..len) with Hugging Face's settings. 0 if it parses; -1 with the position (1-based)
 * and the parser's message otherwise. */
int router_template_check(const char *src, size_t len, int *line, int *column, char *err, size_t err_size);

/* 1 when the Jinja engine is built in (always, since router/template/ was merged); a build without
 * it would set 0 and registration would record a warning instead of checking. */
extern const int router_template_check_available;

#endif
