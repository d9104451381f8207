/* metrics.h - what `run serve` counts for its operators, and the
 * Prometheus text exposition format (version 0.0.4) of GET /metrics.
 *
 * Counters only grow; the histograms keep, for each of a fixed list of
 * upper bounds, how many observations were at most that (cumulative, as
 * Prometheus reads them), with their sum and count. Every function is
 * thread-safe. */
#ifndef METRICS_H
#define METRICS_H

#include <pthread.h>

#include "buf.h"

enum { METRICS_MAX_BUCKETS = 16, METRICS_MAX_SERIES = 64 };

typedef struct {
    const double *bounds;      /* [n_bounds] upper bounds, increasing; +Inf is implied */
    int n_bounds;
    unsigned long long counts[METRICS_MAX_BUCKETS]; /* observations <= bounds[i] (not cumulative) */
    unsigned long long count;  /* every observation, including those above the last bound */
    double sum;
} Histogram;

typedef struct {
    pthread_mutex_t lock;
    struct {
        const char *endpoint;  /* a static string: a route's path, or "other" */
        int status;
        unsigned long long n;
    } requests[METRICS_MAX_SERIES];
    int n_requests;
    unsigned long long prompt_tokens, cached_tokens, generated_tokens;
    Histogram first_token;     /* seconds from a request's arrival to its first token */
    Histogram per_token;       /* seconds between a reply's tokens */
} Metrics;

/* What the engine holds at the moment of a scrape. */
typedef struct {
    int slots, busy_slots, queued;
} MetricsLoad;

void metrics_init(Metrics *m);
void metrics_free(Metrics *m);

/* One answered request: its endpoint (a static string) and status. */
void metrics_request(Metrics *m, const char *endpoint, int status);
/* One request's tokens: its prompt (a completion's, or an embeddings request's inputs), those of
 * them found in the cache, those generated. */
void metrics_tokens(Metrics *m, int prompt, int cached, int generated);
void metrics_first_token(Metrics *m, double seconds);
void metrics_token_gap(Metrics *m, double seconds);

/* Every metric in the Prometheus text format. */
void metrics_write(Buf *out, Metrics *m, const MetricsLoad *load);

#endif
