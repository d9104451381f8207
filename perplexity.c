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

/* Runs the window tokens[begin..end) from position 0 and scores the tokens
 * at first_scored..end-1 by the logits of the token before each. */
static void score_window(Model *m, KVCache *kv, const int *tokens, int begin, int end, int first_scored,
                         PerplexityTotals *t) {
    int vocab = m->config.vocab_size;
    for (int done = begin; done < end; done += m->state.max_tokens) {
        int block = end - done < m->state.max_tokens ? end - done : m->state.max_tokens;
        const float *logits = forward(m, kv, tokens + done, block, done - begin, true);
        /* Row i predicts the token at done + i + 1. */
        for (int i = 0; i < block; i++) {
            int target = done + i + 1;
            if (target < first_scored || target >= end) continue;
            double nll = negative_log_likelihood(logits + (size_t)i * vocab, vocab, tokens[target]);
            t->n_scored++;
            t->nll_sum += nll;
            t->nll_sq_sum += nll * nll;
        }
    }
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
