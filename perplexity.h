/* perplexity.h - how well a model predicts a text: the perplexity over
 * sliding windows, as transformers' perplexity guide computes it.
 *
 * Windows of `window` tokens start every `stride` tokens; each scores only
 * the tokens that no earlier window scored, each one predicted from the
 * window's tokens before it (the first token of the text is never scored:
 * nothing predicts it). The perplexity is exp of the mean negative
 * log-likelihood of the scored tokens; its standard error, as
 * llama-perplexity reports it, is ppl * sqrt(var(nll) / (n - 1)). */
#ifndef PERPLEXITY_H
#define PERPLEXITY_H

#include "net.h"

/* The sums over the tokens scored so far. */
typedef struct {
    long n_scored;
    double nll_sum;            /* sum of -log p(token | context) */
    double nll_sq_sum;         /* sum of its squares */
} PerplexityTotals;

/* Called after each window: window index (from 0) of n_windows, the tokens
 * begin..end-1 it ran, and the totals so far. */
typedef void (*PerplexityProgress)(void *ctx, int index, int n_windows, int begin, int end, const PerplexityTotals *t);

/* The number of windows of `window` tokens every `stride` over n tokens. */
int perplexity_windows(int n, int window, int stride);

/* Scores tokens[0..n) (n >= 2; 2 <= window <= the model's context; 1 <=
 * stride <= window) with a KV cache of `window` positions. */
void perplexity_run(Model *m, const int *tokens, int n, int window, int stride, PerplexityTotals *out,
                    PerplexityProgress progress, void *ctx);

/* exp(mean nll), and its standard error (0 with fewer than 2 tokens). */
double perplexity_value(const PerplexityTotals *t);
double perplexity_error(const PerplexityTotals *t);

#endif
