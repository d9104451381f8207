/* test_bench.c - bench's timing: the median of the repeats (by hand), and
 * a run that fills the context exactly (depth + prompt, depth + decoded
 * tokens) reporting the fill and each repeat once, with speeds. Under the
 * sanitizers, no position past the KV cache is written. */
#include <stdio.h>

#include "../bench.h"
#include "test.h"

typedef struct {
    int fills, repeats;
    bool speeds;               /* every speed positive and finite */
} Seen;

static void seen(void *ctx, int repeat, double prefill, double decode) {
    Seen *s = ctx;
    if (repeat < 0) {
        s->fills++;
        s->speeds = s->speeds && prefill >= 0;
        return;
    }
    s->repeats++;
    s->speeds = s->speeds && prefill > 0 && decode > 0 && prefill < 1e300 && decode < 1e300;
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2}, one[] = {5};
    CHECK(bench_median(odd, 3) == 2 && bench_median(even, 4) == 2.5 && bench_median(one, 1) == 5, "medians");

    char dir[600];
    snprintf(dir, sizeof dir, "%.500s/model", test_scratch("work-bench"));
    test_checkpoint(dir, "--seed 5 --set vocab_size=512");
    Model m;
    Error e;
    ModelOptions opt = {.threads = 2, .context = 12};
    if (model_load(&m, dir, &opt, &e) != 0) die("%s", e.msg);
    BenchOptions o = {.n_prompt = 8, .n_gen = 8, .depth = 4, .repeats = 3};
    double prefill[3], decode[3];
    Seen s = {.speeds = true};
    bench_run(&m, &o, prefill, decode, seen, &s);
    CHECK(s.fills == 1 && s.repeats == 3 && s.speeds, "depth 4 + 8 in a context of 12: the fill and three repeats");
    model_free(&m);
    return test_summary("test_bench");
}
