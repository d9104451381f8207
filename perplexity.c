/* perplexity.c - the perplexity of a text over sliding windows. */
#include "perplexity.h"

#include <math.h>

int perplexity_windows(int n, int window, int stride) {
    if (n <= window) return 1;
    return (n - window + stride - 1) / stride + 1;
}

/* -log softmax(logits)[id], in double precision. */
static double negative_log_likelihood(const float *logits, int vocab, int id) {
    float max = logits[0];
    for (int i = 1; i < vocab; i++) max = fmaxf(max, logits[i]);
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)logits[i] - max);
    return log(sum) - ((double)logits[id] - max);
}

/* A window being scored: its tokens, and the first and end of those it scores. */
typedef struct {
    const int *tokens;         /* the window's, from its first */
    int first_scored, end;     /* window indices */
    int vocab;
    PerplexityTotals *totals;
} Window;

/* LogitRows: row i predicts the window's token first + i + 1. */
static void score_rows(void *ctx, const float *rows, int first, int n_rows) {
    const Window *w = ctx;
    for (int i = 0; i < n_rows; i++) {
        int target = first + i + 1;
        if (target < w->first_scored || target >= w->end) continue;
        double nll = negative_log_likelihood(rows + (size_t)i * w->vocab, w->vocab, w->tokens[target]);
        w->totals->n_scored++;
        w->totals->nll_sum += nll;
        w->totals->nll_sq_sum += nll * nll;
    }
}

/* Runs the window tokens[begin..end) from position 0 and scores the tokens
 * at first_scored..end-1 by the logits of the token before each. */
static void score_window(Model *m, KVCache *kv, const int *tokens, int begin, int end, int first_scored,
                         PerplexityTotals *t) {
    Window w = {.tokens = tokens + begin, .first_scored = first_scored - begin, .end = end - begin,
                .vocab = m->config.vocab_size, .totals = t};
    forward_prompt_each(m, kv, tokens + begin, end - begin, 0, score_rows, &w);
}

void perplexity_run(Model *m, const int *tokens, int n, int window, int stride, PerplexityTotals *out,
                    PerplexityProgress progress, void *ctx) {
    *out = (PerplexityTotals){0};
    KVCache kv;
    kv_cache_init(&kv, m, window);
    int n_windows = perplexity_windows(n, window, stride), scored_end = 1;
    for (int w = 0; w < n_windows; w++) {
        int begin = w * stride, end = begin + window < n ? begin + window : n;
        score_window(m, &kv, tokens, begin, end, scored_end, out);
        scored_end = end;
        if (progress) progress(ctx, w, n_windows, begin, end, out);
    }
    kv_cache_free(&kv);
}

double perplexity_value(const PerplexityTotals *t) { return t->n_scored ? exp(t->nll_sum / t->n_scored) : NAN; }

double perplexity_error(const PerplexityTotals *t) {
    if (t->n_scored < 2) return 0;
    double mean = t->nll_sum / t->n_scored, var = t->nll_sq_sum / t->n_scored - mean * mean;
    return perplexity_value(t) * sqrt(fmax(var, 0) / (t->n_scored - 1));
}
