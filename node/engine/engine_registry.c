/* engine_registry.c — see engine_registry.h. */
#include "node/engine/engine_registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int runtime_given(const char *r) { return r && *r && strcmp(r, "unknown") != 0; }

/* Appends to a bounded buffer (truncates silently; reasons are for humans). */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (!buf || *len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len = (*len + (size_t)n < size) ? *len + (size_t)n : size - 1;
}

static void list_into(char *buf, size_t size, char *const *v, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) append(buf, size, &len, "%s%s", i ? ", " : "", v[i]);
}

/* Why manifest m cannot run this model on this backend at all (rule 1); NULL when it can. */
static const char *reject_reason(const llmr_engine_manifest *m, const llmr_model_descriptor *d,
                                 const llmr_node_backend *b, char *buf, size_t size) {
    char list[256];
    if (!d->architecture || !llmr_engine_manifest_has_architecture(m, d->architecture)) {
        list_into(list, sizeof list, m->architectures, m->n_architectures);
        snprintf(buf, size, "architecture %s not in [%s]", d->architecture ? d->architecture : "(none)", list);
        return buf;
    }
    if (runtime_given(d->runtime) && !llmr_engine_manifest_has_runtime(m, d->runtime)) {
        list_into(list, sizeof list, m->runtimes, m->n_runtimes);
        snprintf(buf, size, "runtime %s not in [%s]", d->runtime, list);
        return buf;
    }
    if (!b->backend || !llmr_engine_manifest_has_backend(m, b->backend)) {
        list_into(list, sizeof list, m->gpu_backends, m->n_gpu_backends);
        snprintf(buf, size, "backend %s not in [%s]", b->backend ? b->backend : "(none)", list);
        return buf;
    }
    if (b->backend && strcmp(b->backend, "cuda") == 0 && m->min_cc_major >= 0 && b->cc_major >= 0 &&
        (b->cc_major < m->min_cc_major || (b->cc_major == m->min_cc_major && b->cc_minor < m->min_cc_minor))) {
        snprintf(buf, size, "needs compute capability %d.%d, GPU has %d.%d", m->min_cc_major, m->min_cc_minor,
                 b->cc_major, b->cc_minor);
        return buf;
    }
    return NULL;
}

/* Highest-priority artifact of m present on the node, or NULL. */
static const llmr_artifact *best_artifact(const llmr_engine_manifest *m, const llmr_artifact *a, size_t na,
                                          int *prio_out) {
    const llmr_artifact *best = NULL;
    int bp = -1;
    for (size_t i = 0; i < m->n_artifacts; i++)
        for (size_t j = 0; j < na; j++)
            if (a[j].name && strcmp(a[j].name, m->artifacts[i].name) == 0 && m->artifacts[i].priority > bp) {
                best = &a[j];
                bp = m->artifacts[i].priority;
            }
    *prio_out = bp;
    return best;
}

/* 1 when candidate (p1, id1) ranks above (p2, id2): higher priority first, then smaller id. */
static int ranks_above(int p1, const char *id1, int p2, const char *id2) {
    return p1 != p2 ? p1 > p2 : strcmp(id1, id2) < 0;
}

int llmr_engine_registry_select(const llmr_engine_manifest *const *ms, size_t n, const llmr_model_descriptor *d,
                                const llmr_artifact *arts, size_t n_arts, const llmr_node_backend *b,
                                llmr_engine_choice *out, char *reason, size_t reason_size) {
    if (reason && reason_size) reason[0] = 0;
    if (!d || !b || !out) {
        if (reason && reason_size) snprintf(reason, reason_size, "invalid arguments");
        return -1;
    }
    long art_best = -1, fmt_best = -1;
    int art_prio = -1;
    const llmr_artifact *art_pick = NULL;
    char why[512];
    for (size_t i = 0; i < n; i++) {
        const llmr_engine_manifest *m = ms[i];
        if (!m || reject_reason(m, d, b, why, sizeof why)) continue;
        int ap;
        const llmr_artifact *a = best_artifact(m, arts, n_arts, &ap);
        if (a && (art_best < 0 || ap > art_prio ||
                  (ap == art_prio && ranks_above(m->priority, m->id, ms[art_best]->priority, ms[art_best]->id)))) {
            art_best = (long)i; art_prio = ap; art_pick = a;
        }
        if (d->format && llmr_engine_manifest_has_format(m, d->format) &&
            (fmt_best < 0 || ranks_above(m->priority, m->id, ms[fmt_best]->priority, ms[fmt_best]->id)))
            fmt_best = (long)i;
    }
    if (art_best >= 0) {
        out->index = (size_t)art_best; out->manifest = ms[art_best]; out->artifact = art_pick;
        return 0;
    }
    if (fmt_best >= 0) {
        out->index = (size_t)fmt_best; out->manifest = ms[fmt_best]; out->artifact = NULL;
        return 0;
    }
    size_t len = 0;
    append(reason, reason_size, &len, "no engine for %s (runtime %s, architecture %s, format %s, backend %s)",
           d->id ? d->id : "(unnamed model)", runtime_given(d->runtime) ? d->runtime : "unknown",
           d->architecture ? d->architecture : "(none)", d->format ? d->format : "(none)",
           b->backend ? b->backend : "(none)");
    size_t listed = 0;
    for (size_t i = 0; i < n; i++) {
        const llmr_engine_manifest *m = ms[i];
        if (!m) continue;
        const char *r = reject_reason(m, d, b, why, sizeof why);
        if (!r) {
            char list[256];
            list_into(list, sizeof list, m->formats, m->n_formats);
            snprintf(why, sizeof why, "format %s not in [%s] and none of its artifacts is present",
                     d->format ? d->format : "(none)", list);
        }
        append(reason, reason_size, &len, "%s %s: %s", listed++ ? ";" : ":", m->id, why);
    }
    if (!listed) append(reason, reason_size, &len, ": no engines are installed");
    return -1;
}
