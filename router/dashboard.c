/* dashboard.c — GET /dashboard: the operator's web page (router/dashboard/index.html, compiled in
 * as router/dashboard/page.c). The page itself holds no data and needs no key; it asks the operator
 * for the admin key and reads the /v0 APIs with it, so serving it adds no new access. */
#include <stdio.h>

#include "router/dashboard/page.h"
#include "router/router.h"

/* The page is static and self-contained: it may run inline script and style and talk only to this
 * router. It must not be framed (clickjacking of the delete button) nor cached (a stale page after
 * an upgrade would call APIs that changed). */
static void h_dashboard(llmr_http_request *req, void *user) {
    (void)user;
    llmr_http_add_header(req, "Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                         "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                         "frame-ancestors 'none'");
    llmr_http_add_header(req, "X-Frame-Options", "DENY");
    llmr_http_add_header(req, "X-Content-Type-Options", "nosniff");
    llmr_http_add_header(req, "Referrer-Policy", "no-referrer");
    llmr_http_add_header(req, "Cache-Control", "no-store");
    llmr_http_reply_text(req, 200, "text/html; charset=utf-8", router_dashboard_page, router_dashboard_page_len);
}

int router_dashboard_init(router_ctx *ctx, char *err, size_t es) {
    if (llmr_http_server_route(ctx->http, "GET", "/dashboard", h_dashboard, ctx)) {
        snprintf(err, es, "cannot add the /dashboard route (route table full)");
        return -1;
    }
    return 0;
}
