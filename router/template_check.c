/* template_check.c — see template_check.h: registration's parse check through the Jinja engine
 * (router/chat_prompt.h, router/template/). */
#include "router/template_check.h"

#include "router/chat_prompt.h"

const int router_template_check_available = 1;

int router_template_check(const char *src, size_t len, int *line, int *column, char *err, size_t es) {
    jinja_pos pos = {0, 0, 0};
    if (chat_prompt_check_template(src, len, &pos, err, es) == 0) return 0;
    *line = pos.line;
    *column = pos.column;
    return -1;
}
