/* test_perplexity.c - the windows, the formulas by hand, perplexity_run's
 * values against the numpy reference's (tests/data/inside_golden.json, made
 * by scripts/make_inside_golden.py), and its windows on a random-weight
 * checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../json.h"
#include "../perplexity.h"
#include "test.h"

static void test_windows(void) {
    CHECK(perplexity_windows(3, 4, 2) == 1, "a text shorter than a window: one window");
    CHECK(perplexity_windows(4, 4, 2) == 1, "a text of one window: one window");
    CHECK(perplexity_windows(10, 4, 2) == 4, "10 tokens, windows of 4 every 2: 0-4, 2-6, 4-8, 6-10");
    CHECK(perplexity_windows(11, 4, 2) == 5, "11 tokens: and 8-11");
    CHECK(perplexity_windows(10, 4, 4) == 3, "stride = window: 0-4, 4-8, 8-10");
}

static void test_formulas(void) {
    /* nll 1 and 3: mean 2, variance 1, so ppl e^2 and error e^2 * sqrt(1 / 1). */
    PerplexityTotals t = {.n_scored = 2, .nll_sum = 4, .nll_sq_sum = 10};
    CHECK(fabs(perplexity_value(&t) - exp(2)) < 1e-12, "ppl = exp(mean nll), got %g", perplexity_value(&t));
    CHECK(fabs(perplexity_error(&t) - exp(2)) < 1e-12, "error = ppl * sqrt(var / (n - 1)), got %g", perplexity_error(&t));
    t = (PerplexityTotals){.n_scored = 1, .nll_sum = 2, .nll_sq_sum = 4};
    CHECK(perplexity_error(&t) == 0, "one token: no error estimate");
}

typedef struct {
    int calls, last_end;
    long scored;
} Progress;

static void count_window(void *ctx, int index, int n_windows, int begin, int end, const PerplexityTotals *t) {
    Progress *p = ctx;
    CHECK(index == p->calls && n_windows == 5 && begin == 2 * index && end > p->last_end, "window %d of %d: %d..%d",
          index, n_windows, begin, end);
    p->calls++;
    p->last_end = end;
    p->scored = t->n_scored;
}

static void test_run(void) {
    const char *dir = test_scratch("perplexity");
    test_checkpoint(dir, "--seed 3 --set vocab_size=512");
    Model m;
    Error e;
    ModelOptions opt = {.context = 64, .threads = 1};
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "loading the checkpoint: %s", e.msg);
        return;
    }
    int tokens[11];
    for (int i = 0; i < 11; i++) tokens[i] = (i * 37 + 5) % 512;
    PerplexityTotals whole, again, strided;
    perplexity_run(&m, tokens, 11, 16, 8, &whole, NULL, NULL);
    perplexity_run(&m, tokens, 11, 11, 3, &again, NULL, NULL);
    CHECK(whole.n_scored == 10, "one window scores every token but the first, got %ld", whole.n_scored);
    CHECK(fabs(whole.nll_sum - again.nll_sum) < 1e-9 * whole.nll_sum, "a window as long as the text: the stride does not matter");
    Progress p = {0};
    perplexity_run(&m, tokens, 11, 4, 2, &strided, count_window, &p);
    CHECK(p.calls == 5 && p.last_end == 11 && p.scored == 10, "windows of 4 every 2: 5 windows, 10 tokens scored, got %d, %ld",
          p.calls, p.scored);
    model_free(&m);
}

/* The perplexity and its error that the reference's logits give the tokens
 * of tests/data/ppl_text.txt on the golden file's checkpoint, for each of
 * its windows and strides: within 1e-4 and 1e-3 relative (fp32 sums). */
static void test_reference(void) {
    JsonDoc doc;
    Error e;
    if (json_parse_file(&doc, "tests/data/inside_golden.json", &e) != 0) {
        CHECK(0, "%s", e.msg);
        return;
    }
    const JsonValue *ids = json_get(&doc.root, "ppl_ids"), *cases = json_get(&doc.root, "ppl");
    const char *dir = test_scratch("perplexity-reference");
    test_checkpoint(dir, json_get(&doc.root, "gen_checkpoint")->string);
    Model m;
    ModelOptions opt = {.context = 128, .threads = 1};
    if (model_load(&m, dir, &opt, &e) != 0) {
        CHECK(0, "loading the checkpoint: %s", e.msg);
        json_free(&doc);
        return;
    }
    int n = (int)ids->len, *tokens = xmalloc(ids->len * sizeof *tokens);
    for (int i = 0; i < n; i++) tokens[i] = (int)ids->items[i].number.integer;
    for (size_t c = 0; c < cases->len; c++) {
        const JsonValue *want = &cases->items[c];
        int window = (int)json_get(want, "window")->number.integer, stride = (int)json_get(want, "stride")->number.integer;
        double ppl = json_get(want, "ppl")->number.value, error = json_get(want, "error")->number.value;
        PerplexityTotals t;
        perplexity_run(&m, tokens, n, window, stride, &t, NULL, NULL);
        CHECK(t.n_scored == json_get(want, "scored")->number.integer, "window %d stride %d: %ld tokens scored", window,
              stride, t.n_scored);
        CHECK(fabs(perplexity_value(&t) - ppl) <= 1e-4 * ppl, "window %d stride %d: perplexity %.9g, the reference %.9g",
              window, stride, perplexity_value(&t), ppl);
        CHECK(fabs(perplexity_error(&t) - error) <= 1e-3 * error, "window %d stride %d: error %.9g, the reference %.9g",
              window, stride, perplexity_error(&t), error);
    }
    free(tokens);
    model_free(&m);
    json_free(&doc);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_windows();
    test_formulas();
    test_run();
    test_reference();
    return test_summary("test_perplexity");
}
