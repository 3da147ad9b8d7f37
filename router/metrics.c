/* metrics.c — see metrics.h. Fixed-size tables; the text is built with open_memstream. */
#include "router/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES 16
#define MAX_STATUSES 16
static const double BUCKETS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
#define NB (sizeof BUCKETS / sizeof BUCKETS[0])

typedef struct hist { uint64_t b[NB], count; double sum; } hist;
typedef struct route {
    char name[64];
    int status[MAX_STATUSES];
    uint64_t by_status[MAX_STATUSES];
    int n_status;
    hist latency, ttft;
} route;

struct router_metrics {
    pthread_mutex_t mu;
    route r[MAX_ROUTES];
    int n;
    uint64_t tokens_in, tokens_out, failovers;
};

router_metrics *router_metrics_create(void) {
    router_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void router_metrics_destroy(router_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static route *route_of(router_metrics *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->r[i].name, name)) return &m->r[i];
    if (m->n == MAX_ROUTES) return NULL;
    route *r = &m->r[m->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void observe(hist *h, double s) {
    for (size_t i = 0; i < NB; i++)
        if (s <= BUCKETS[i]) h->b[i]++;
    h->count++;
    h->sum += s;
}

void router_metrics_request(router_metrics *m, const char *name, int status, double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    route *r = route_of(m, name);
    if (r) {
        int i = 0;
        while (i < r->n_status && r->status[i] != status) i++;
        if (i == r->n_status && i < MAX_STATUSES) r->status[r->n_status++] = status;
        if (i < MAX_STATUSES) r->by_status[i]++;
        observe(&r->latency, seconds);
    }
    pthread_mutex_unlock(&m->mu);
}

void router_metrics_ttft(router_metrics *m, const char *name, double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    route *r = route_of(m, name);
    if (r) observe(&r->ttft, seconds);
    pthread_mutex_unlock(&m->mu);
}

void router_metrics_tokens(router_metrics *m, uint64_t in, uint64_t out) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->tokens_in += in;
    m->tokens_out += out;
    pthread_mutex_unlock(&m->mu);
}

void router_metrics_failover(router_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->failovers++;
    pthread_mutex_unlock(&m->mu);
}

static void put_hist(FILE *f, const char *metric, const char *routename, const hist *h) {
    for (size_t i = 0; i < NB; i++)
        fprintf(f, "%s_bucket{route=\"%s\",le=\"%g\"} %llu\n", metric, routename, BUCKETS[i], (unsigned long long)h->b[i]);
    fprintf(f, "%s_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", metric, routename, (unsigned long long)h->count);
    fprintf(f, "%s_sum{route=\"%s\"} %.6f\n", metric, routename, h->sum);
    fprintf(f, "%s_count{route=\"%s\"} %llu\n", metric, routename, (unsigned long long)h->count);
}

char *router_metrics_render(router_metrics *m, int queue_depth, int nodes_online) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    pthread_mutex_lock(&m->mu);
    fputs("# HELP llmr_router_requests_total Inference API requests by route and HTTP status.\n"
          "# TYPE llmr_router_requests_total counter\n", f);
    for (int i = 0; i < m->n; i++)
        for (int j = 0; j < m->r[i].n_status; j++)
            fprintf(f, "llmr_router_requests_total{route=\"%s\",status=\"%d\"} %llu\n", m->r[i].name, m->r[i].status[j],
                    (unsigned long long)m->r[i].by_status[j]);
    fputs("# HELP llmr_router_request_duration_seconds Time from request to its last byte.\n"
          "# TYPE llmr_router_request_duration_seconds histogram\n", f);
    for (int i = 0; i < m->n; i++) put_hist(f, "llmr_router_request_duration_seconds", m->r[i].name, &m->r[i].latency);
    fputs("# HELP llmr_router_time_to_first_token_seconds Time from request to the first streamed token.\n"
          "# TYPE llmr_router_time_to_first_token_seconds histogram\n", f);
    for (int i = 0; i < m->n; i++)
        if (m->r[i].ttft.count) put_hist(f, "llmr_router_time_to_first_token_seconds", m->r[i].name, &m->r[i].ttft);
    fprintf(f, "# HELP llmr_router_tokens_total Tokens in (prompt) and out (completion).\n"
               "# TYPE llmr_router_tokens_total counter\n"
               "llmr_router_tokens_total{direction=\"in\"} %llu\nllmr_router_tokens_total{direction=\"out\"} %llu\n",
            (unsigned long long)m->tokens_in, (unsigned long long)m->tokens_out);
    fprintf(f, "# HELP llmr_router_failovers_total Requests retried on another node before their first byte.\n"
               "# TYPE llmr_router_failovers_total counter\nllmr_router_failovers_total %llu\n",
            (unsigned long long)m->failovers);
    pthread_mutex_unlock(&m->mu);
    fprintf(f, "# HELP llmr_router_queue_depth Requests waiting for a free node.\n"
               "# TYPE llmr_router_queue_depth gauge\nllmr_router_queue_depth %d\n"
               "# HELP llmr_router_nodes_online Nodes sending heartbeats.\n"
               "# TYPE llmr_router_nodes_online gauge\nllmr_router_nodes_online %d\n",
            queue_depth, nodes_online);
    if (fclose(f) != 0) { free(text); return NULL; }
    return text;
}
