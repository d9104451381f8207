/* bench.h - the timing behind `run bench`: prefill of a prompt (one pass
 * over all its tokens) and decoding (one token at a time), deep in a KV
 * cache filled to a depth, repeated; their speeds and medians. */
#ifndef BENCH_H
#define BENCH_H

#include "net.h"

typedef struct {
    int n_prompt;              /* prompt tokens to prefill; 0: no prefill test */
    int n_gen;                 /* tokens to decode; 0: no decoding test */
    int depth;                 /* tokens in the KV cache before each test */
    int repeats;
} BenchOptions;

/* Called as the run goes: after filling the cache to the depth (repeat -1,
 * with its seconds in `prefill`), then after each repeat with its speeds
 * in tokens per second. */
typedef void (*BenchProgress)(void *ctx, int repeat, double prefill, double decode);

/* Runs the tests on m (depth + n_prompt and depth + n_gen at most its
 * context) with a fixed, arbitrary prompt of valid ids, filling
 * prefill[repeats] and decode[repeats] with the speeds. */
void bench_run(Model *m, const BenchOptions *o, double *prefill, double *decode, BenchProgress progress, void *ctx);

/* The median of v[0..n) (n >= 1), which it sorts. */
double bench_median(double *v, int n);

#endif
