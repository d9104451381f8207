/* bench.c - timing prefill and decoding. */
#include "bench.h"

#include <stdlib.h>

#include "sampler.h"
#include "util.h"

void bench_run(Model *m, const BenchOptions *o, double *prefill, double *decode, BenchProgress progress, void *ctx) {
    int vocab = m->config.vocab_size;
    int longest = o->n_prompt > o->depth ? o->n_prompt : o->depth > 0 ? o->depth : 1;
    int *tokens = xmalloc((size_t)longest * sizeof *tokens);
    for (int i = 0; i < longest; i++) tokens[i] = (int)((i * 7919L + 13) % vocab);

    /* A first token maps the weights in; then the cache is filled to the depth. */
    KVCache kv;
    kv_cache_init(&kv, m, m->max_context);
    forward(m, &kv, tokens, 1, 0, false);
    if (o->depth > 0) {
        double t0 = now_seconds();
        forward_prompt(m, &kv, tokens, o->depth, 0);
        progress(ctx, -1, now_seconds() - t0, 0);
    }
    for (int r = 0; r < o->repeats; r++) {
        double t0 = now_seconds();
        forward_prompt(m, &kv, tokens, o->n_prompt, o->depth);
        prefill[r] = o->n_prompt / (now_seconds() - t0);
        /* Each decoded token is the greedy choice after the last. */
        int token = tokens[0];
        t0 = now_seconds();
        for (int i = 0; i < o->n_gen; i++) token = argmax(forward(m, &kv, &token, 1, o->depth + i, false), vocab);
        decode[r] = o->n_gen / (now_seconds() - t0);
        progress(ctx, r, prefill[r], decode[r]);
    }
    free(tokens);
    kv_cache_free(&kv);
}

static int compare_doubles(const void *x, const void *y) {
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
