/* metrics.c - the server's counters and histograms, and their text format. */
#include "metrics.h"

#include <string.h>

/* Upper bounds in seconds: the first token waits for a prompt (and perhaps
 * a queue), a token for one decoding step. */
static const double first_token_bounds[] = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double per_token_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5};

void metrics_init(Metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->first_token = (Histogram){.bounds = first_token_bounds, .n_bounds = sizeof first_token_bounds / sizeof(double)};
    m->per_token = (Histogram){.bounds = per_token_bounds, .n_bounds = sizeof per_token_bounds / sizeof(double)};
}

void metrics_free(Metrics *m) { pthread_mutex_destroy(&m->lock); }

void metrics_request(Metrics *m, const char *endpoint, int status) {
    pthread_mutex_lock(&m->lock);
    int i = 0;
    while (i < m->n_requests && !(m->requests[i].status == status && strcmp(m->requests[i].endpoint, endpoint) == 0)) i++;
    if (i == m->n_requests && i < METRICS_MAX_SERIES) {
        m->requests[i].endpoint = endpoint;
        m->requests[i].status = status;
        m->n_requests++;
    }
    if (i < m->n_requests) m->requests[i].n++;
    pthread_mutex_unlock(&m->lock);
}

void metrics_tokens(Metrics *m, int prompt, int cached, int generated) {
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += (unsigned)prompt;
    m->cached_tokens += (unsigned)cached;
    m->generated_tokens += (unsigned)generated;
    pthread_mutex_unlock(&m->lock);
}

static void observe(Metrics *m, Histogram *h, double x) {
    pthread_mutex_lock(&m->lock);
    int i = 0;
    while (i < h->n_bounds && x > h->bounds[i]) i++;
    if (i < h->n_bounds) h->counts[i]++;
    h->count++;
    h->sum += x;
    pthread_mutex_unlock(&m->lock);
}

void metrics_first_token(Metrics *m, double seconds) { observe(m, &m->first_token, seconds); }

void metrics_token_gap(Metrics *m, double seconds) { observe(m, &m->per_token, seconds); }

/* "# HELP" and "# TYPE" lines, then one sample without labels when value >= 0. */
static void family(Buf *out, const char *name, const char *type, const char *help, double value) {
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (value >= 0) buf_printf(out, "%s %.17g\n", name, value);
}

static void histogram(Buf *out, const char *name, const char *help, const Histogram *h) {
    family(out, name, "histogram", help, -1);
    unsigned long long cumulative = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cumulative += h->counts[i];
        buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], cumulative);
    }
    buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.17g\n%s_count %llu\n", name, h->count, name, h->sum, name,
               h->count);
}

void metrics_write(Buf *out, Metrics *m, const MetricsLoad *load) {
    pthread_mutex_lock(&m->lock);
    family(out, "run_requests_total", "counter", "HTTP requests answered, by endpoint and status.", -1);
    for (int i = 0; i < m->n_requests; i++)
        buf_printf(out, "run_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->requests[i].endpoint,
                   m->requests[i].status, m->requests[i].n);
    family(out, "run_prompt_tokens_total", "counter",
           "Prompt tokens of completions (cached ones included) and of embeddings' inputs.", (double)m->prompt_tokens);
    family(out, "run_cached_prompt_tokens_total", "counter", "Prompt tokens found in a slot's cache (not computed).",
           (double)m->cached_tokens);
    family(out, "run_generated_tokens_total", "counter", "Tokens generated (an end token too).",
           (double)m->generated_tokens);
    family(out, "run_slots", "gauge", "Slots: requests generated at once at most.", load->slots);
    family(out, "run_slots_busy", "gauge", "Slots running a request.", load->busy_slots);
    family(out, "run_queue_length", "gauge", "Requests waiting for a slot.", load->queued);
    histogram(out, "run_time_to_first_token_seconds", "Seconds from a completion's arrival to its first token.",
              &m->first_token);
    histogram(out, "run_time_per_output_token_seconds", "Seconds between two tokens of a reply.", &m->per_token);
    pthread_mutex_unlock(&m->lock);
}
