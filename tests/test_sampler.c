/* test_sampler.c - the sampler against distributions worked out by hand, and
 * against a brute-force reference written here in double precision (sort
 * everything, apply each rule literally), on small and on Qwen-sized
 * vocabularies; then its random generator, its draws and their frequencies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sampler.h"
#include "test.h"

enum { QWEN_VOCAB = 151936 };

static SamplerConfig config(double temperature, int top_k, double top_p, double min_p, double repeat_penalty) {
    return (SamplerConfig){.temperature = temperature, .top_k = top_k, .top_p = top_p, .min_p = min_p, .repeat_penalty = repeat_penalty, .seed = 1};
}

/* Logits whose softmax is weights / sum(weights): the log of each weight. */
static void logits_from_weights(const double *weights, int n, float *logits) {
    for (int i = 0; i < n; i++) logits[i] = (float)log(weights[i]);
}

/* The candidates the sampler leaves for logits[0..n) (copied, so the caller's
 * stay as they are), copied into out; returns how many. */
static size_t run_candidates(const SamplerConfig *cfg, const float *logits, int n, const int *context,
                             size_t n_context, SamplerCandidate *out) {
    Error e;
    Sampler *s = sampler_new(cfg, n, &e);
    float *work = malloc((size_t)n * sizeof *work);
    memcpy(work, logits, (size_t)n * sizeof *work);
    const SamplerCandidate *c;
    size_t count = sampler_candidates(s, work, context, n_context, 0, &c);
    memcpy(out, c, count * sizeof *c);
    free(work);
    sampler_free(s);
    return count;
}

/* Checks the sampler's distribution against want[0..n): a token with
 * want[i] == 0 must be gone, the others present with probability want[i]. */
static void expect_distribution(const char *what, const SamplerConfig *cfg, const float *logits, int n,
                                const double *want) {
    SamplerCandidate got[64];
    size_t count = run_candidates(cfg, logits, n, NULL, 0, got);
    size_t want_count = 0;
    for (int i = 0; i < n; i++) want_count += want[i] > 0;
    CHECK(count == want_count, "%s: %zu candidates left (want %zu)", what, count, want_count);
    for (size_t j = 0; j < count; j++) {
        int id = got[j].id;
        CHECK(j == 0 || got[j - 1].id < id, "%s: candidates in ascending id order", what);
        CHECK(want[id] > 0 && fabs(got[j].prob - want[id]) < 1e-6, "%s: token %d has probability %.7f (want %.7f)",
              what, id, got[j].prob, want[id]);
    }
}

/* ---- settings ---- */

static void test_config(void) {
    struct {
        SamplerConfig cfg;
        const char *complaint;  /* NULL: valid */
    } cases[] = {
        {config(0.7, 20, 0.8, 0.0, 1.05), NULL},
        {config(0, 0, 1, 0, 1), NULL},
        {config(1e-6, 0, 1, 1, 0.01), NULL},
        {config(-0.1, 0, 1, 0, 1), "temperature"},
        {config(1e-7, 0, 1, 0, 1), "temperature"},
        {config(NAN, 0, 1, 0, 1), "temperature"},
        {config(INFINITY, 0, 1, 0, 1), "temperature"},
        {config(1, -1, 1, 0, 1), "top-k"},
        {config(1, 0, 0, 0, 1), "top-p"},
        {config(1, 0, 1.5, 0, 1), "top-p"},
        {config(1, 0, NAN, 0, 1), "top-p"},
        {config(1, 0, 1, -0.1, 1), "min-p"},
        {config(1, 0, 1, 1.1, 1), "min-p"},
        {config(1, 0, 1, 0, 0), "repeat penalty"},
        {config(1, 0, 1, 0, -1.2), "repeat penalty"},
        {config(1, 0, 1, 0, INFINITY), "repeat penalty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Error e = {{0}};
        int rc = sampler_check_config(&cases[i].cfg, &e);
        if (!cases[i].complaint) {
            CHECK(rc == 0, "config %zu is valid (%s)", i, e.msg);
            continue;
        }
        CHECK(rc == -1 && strstr(e.msg, cases[i].complaint) != NULL, "config %zu refused naming %s (got '%s')", i,
              cases[i].complaint, e.msg);
        Error e2 = {{0}};
        CHECK(sampler_new(&cases[i].cfg, 10, &e2) == NULL && strcmp(e.msg, e2.msg) == 0,
              "sampler_new refuses config %zu with the same message", i);
    }
    Error e = {{0}};
    SamplerConfig ok = config(1, 0, 1, 0, 1);
    CHECK(sampler_new(&ok, 0, &e) == NULL && strstr(e.msg, "vocabulary") != NULL, "vocabulary of 0 refused");
}

/* ---- random numbers ---- */

static void test_rng(void) {
    /* splitmix64's published test vector (Rosetta Code, seed 1234567). */
    const uint64_t want[] = {6457827717110365317u, 3203168211198807973u, 9817491932198370423u,
                             4593380528125082431u, 16408922859458223821u};
    Rng rng;
    rng_seed(&rng, 1234567);
    for (int i = 0; i < 5; i++) {
        uint64_t x = rng_next(&rng);
        CHECK(x == want[i], "splitmix64 output %d is %llu (got %llu)", i, (unsigned long long)want[i],
              (unsigned long long)x);
    }

    /* rng_uniform is the top 53 bits over 2^53. */
    Rng a, b;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    int exact = 1;
    for (int i = 0; i < 1000; i++) exact &= rng_uniform(&a) == ldexp((double)(rng_next(&b) >> 11), -53);
    CHECK(exact, "rng_uniform = (rng_next >> 11) * 2^-53");

    double sum = 0, lo = 1, hi = 0;
    rng_seed(&a, 7);
    for (int i = 0; i < 1000000; i++) {
        double u = rng_uniform(&a);
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0 && hi < 1 && lo < 1e-5 && hi > 1 - 1e-5, "a million draws cover [0, 1) (min %g, max %g)", lo, hi);
    CHECK(fabs(sum / 1e6 - 0.5) < 1e-3, "a million draws average 0.5 (got %.5f)", sum / 1e6);
}

/* ---- hand-computed distributions ---- */

static void test_greedy(void) {
    SamplerConfig cfg = config(0, 0, 1, 0, 1);
    Error e;
    Sampler *s = sampler_new(&cfg, 6, &e);
    float ties[6] = {1, 3, -INFINITY, 3, 2, 3};
    CHECK(sampler_sample(s, ties, NULL, 0, 0) == 1, "argmax ties go to the lowest id");
    float equal[6] = {0, 0, 0, 0, 0, 0};
    CHECK(sampler_sample(s, equal, NULL, 0, 0) == 0, "all equal: id 0");
    float last[6] = {-5, -4, -3, -2, -1, -0.5f};
    CHECK(sampler_sample(s, last, NULL, 0, 0) == 5, "negative logits: the largest");
    float more[6] = {1, 3, 0, 3, 2, 3};
    const SamplerCandidate *c;
    size_t n = sampler_candidates(s, more, NULL, 0, 0, &c);
    CHECK(n == 1 && c[0].id == 1 && c[0].prob == 1, "greedy leaves one candidate of probability 1");
    sampler_free(s);
    /* Top-k, top-p and min-p play no part in greedy decoding. */
    cfg = config(0, 1, 0.1, 0.9, 1);
    s = sampler_new(&cfg, 6, &e);
    float again[6] = {1, 3, 0, 3, 2, 5};
    CHECK(sampler_sample(s, again, NULL, 0, 0) == 5, "greedy ignores the filters");
    sampler_free(s);
}

/* The first index of the largest non-NaN value, one comparison at a time:
 * the definition argmax's lanes must agree with. */
static int first_largest(const float *x, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 ? 0 : best;
}

static void test_argmax_lanes(void) {
    /* Lengths around the lanes' width and a vocabulary's, the largest value
     * placed at every residue, in the tail, and tied across lanes. */
    int lengths[] = {1, 2, 15, 16, 17, 31, 32, 33, 100, 151936};
    Rng rng;
    rng_seed(&rng, 7);
    float *x = xmalloc(151936 * sizeof(float));
    int failures = 0, cases = 0;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int n = lengths[l];
        for (int trial = 0; trial < 40; trial++) {
            for (int i = 0; i < n; i++) x[i] = (float)(rng_uniform(&rng) * 20 - 10);
            int at = (int)(rng_uniform(&rng) * n);
            x[at] = 11;
            if (trial % 4 == 1) x[(int)(rng_uniform(&rng) * n)] = 11;              /* a tie, maybe earlier */
            if (trial % 4 == 2) x[(int)(rng_uniform(&rng) * n)] = NAN;             /* NaNs are passed over */
            if (trial % 4 == 3) for (int i = 0; i < n; i += 3) x[i] = -INFINITY;
            if (trial == 5) x[0] = NAN;
            cases++;
            if (argmax(x, n) != first_largest(x, n)) failures++;
        }
        for (int i = 0; i < n; i++) x[i] = -INFINITY;
        cases++;
        if (argmax(x, n) != 0) failures++;
        for (int i = 0; i < n; i++) x[i] = 2.5f;
        cases++;
        if (argmax(x, n) != 0) failures++;
    }
    CHECK(failures == 0, "argmax agrees with a one-at-a-time scan on %d arrays (%d differ)", cases, failures);
    free(x);
}

static void test_repetition_penalty(void) {
    /* Penalty 2 over the context {0, 1, 1, 1, 3, 99, -1}: token 0 (2.0,
     * positive) is halved to 1.0; token 1 (-1.0, negative) doubled to -2.0
     * once, not three times; token 3 (0.0) stays 0; tokens 2 and 4 are not in
     * the context; 99 and -1 are not in the vocabulary and are ignored. */
    const int context[] = {0, 1, 1, 1, 3, 99, -1};
    SamplerConfig cfg = config(1, 0, 1, 0, 2);
    Error e;
    Sampler *s = sampler_new(&cfg, 5, &e);
    float logits[5] = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
    const SamplerCandidate *c;
    size_t n = sampler_candidates(s, logits, context, 7, 0, &c);
    const float want[5] = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f};
    CHECK(memcmp(logits, want, sizeof want) == 0, "penalty 2: %g %g %g %g %g", logits[0], logits[1], logits[2],
          logits[3], logits[4]);
    CHECK(n == 5 && c[0].logit == 1.0f && c[1].logit == -2.0f, "the candidates carry the penalised logits");

    /* Each step penalises its own context, whatever the last one held. */
    float fresh[5] = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
    const int other[] = {4, 0};
    sampler_candidates(s, fresh, other, 2, 0, &c);
    CHECK(fresh[0] == 1.0f && fresh[1] == -1.0f && fresh[4] == 1.5f, "next step penalises only its own context");
    sampler_free(s);

    /* A penalty below 1 favours the context: 2.0 / 0.5 = 4, -1.0 * 0.5 = -0.5. */
    cfg = config(1, 0, 1, 0, 0.5);
    s = sampler_new(&cfg, 5, &e);
    float favour[5] = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
    sampler_candidates(s, favour, context, 7, 0, &c);
    CHECK(favour[0] == 4.0f && favour[1] == -0.5f && favour[2] == 0.5f, "penalty 0.5 favours the context");
    sampler_free(s);

    /* Greedy sees the penalty too: 2.0 / 1.1 = 1.82 now loses to 1.9. */
    cfg = config(0, 0, 1, 0, 1.1);
    s = sampler_new(&cfg, 2, &e);
    float close[2] = {2.0f, 1.9f};
    const int seen[] = {0};
    CHECK(sampler_sample(s, close, seen, 1, 0) == 1, "greedy picks after the penalty");
    float close2[2] = {2.0f, 1.9f};
    CHECK(sampler_sample(s, close2, NULL, 0, 0) == 0, "no context, no penalty");
    sampler_free(s);

    /* The distribution after the penalty: weights {4, 1, 2} (logits ln 4,
     * 0, ln 2), penalty 2 on token 0 turns ln 4 into ln 2, so the weights
     * become {2, 1, 2}: probabilities 0.4, 0.2, 0.4. */
    const double w[3] = {4, 1, 2};
    float logits3[3];
    logits_from_weights(w, 3, logits3);
    cfg = config(1, 0, 1, 0, 2);
    SamplerCandidate got[3];
    const int zero[] = {0, 0};
    n = run_candidates(&cfg, logits3, 3, zero, 2, got);
    CHECK(n == 3 && fabs(got[0].prob - 0.4) < 1e-6 && fabs(got[1].prob - 0.2) < 1e-6 &&
              fabs(got[2].prob - 0.4) < 1e-6,
          "penalised distribution 0.4 0.2 0.4 (got %g %g %g)", got[0].prob, got[1].prob, got[2].prob);
}

static void test_temperature(void) {
    /* Weights {1, 2, 3, 4}: at temperature T the probabilities go as w^(1/T). */
    const double w[4] = {1, 2, 3, 4};
    float logits[4];
    logits_from_weights(w, 4, logits);

    SamplerConfig cfg = config(1, 0, 1, 0, 1);
    expect_distribution("T=1", &cfg, logits, 4, (const double[]){0.1, 0.2, 0.3, 0.4});

    /* T = 0.5: w^2 = 1, 4, 9, 16, over 30. */
    cfg.temperature = 0.5;
    expect_distribution("T=0.5", &cfg, logits, 4, (const double[]){1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0});

    /* T = 2: sqrt(w) = 1, 1.4142136, 1.7320508, 2, over 6.1462644. */
    cfg.temperature = 2;
    expect_distribution("T=2", &cfg, logits, 4,
                        (const double[]){1 / 6.1462644, 1.4142136 / 6.1462644, 1.7320508 / 6.1462644, 2 / 6.1462644});

    /* Huge logits neither overflow nor underflow: the softmax of {1000, 999,
     * 998} is that of {0, -1, -2}: 1, e^-1, e^-2 over 1.5032147. */
    cfg.temperature = 1;
    expect_distribution("logits near 1000", &cfg, (const float[]){1000, 999, 998}, 3,
                        (const double[]){1 / 1.5032147, 0.3678794 / 1.5032147, 0.1353353 / 1.5032147});
    expect_distribution("logits near -1000", &cfg, (const float[]){-1000, -1001}, 2,
                        (const double[]){1 / 1.3678794, 0.3678794 / 1.3678794});

    /* The logits come back divided by the temperature. */
    cfg.temperature = 2;
    Error e;
    Sampler *s = sampler_new(&cfg, 4, &e);
    float work[4] = {1.0f, -3.0f, 0.5f, 7.0f};
    const SamplerCandidate *c;
    sampler_candidates(s, work, NULL, 0, 0, &c);
    CHECK(work[0] == 0.5f && work[1] == -1.5f && work[2] == 0.25f && work[3] == 3.5f, "logits divided in place");
    sampler_free(s);
}

static void test_top_k(void) {
    const double w[5] = {1, 4, 2, 3, 0.5};
    float logits[5];
    logits_from_weights(w, 5, logits);

    /* k = 2 keeps weights 4 (id 1) and 3 (id 3): 4/7 and 3/7. */
    SamplerConfig cfg = config(1, 2, 1, 0, 1);
    expect_distribution("top-k 2", &cfg, logits, 5, (const double[]){0, 4 / 7.0, 0, 3 / 7.0, 0});

    /* At T = 0.5 the same two, squared: 16/25 and 9/25. */
    cfg.temperature = 0.5;
    expect_distribution("top-k 2, T=0.5", &cfg, logits, 5, (const double[]){0, 16 / 25.0, 0, 9 / 25.0, 0});

    /* k = 1 leaves the most probable alone. */
    cfg = config(1, 1, 1, 0, 1);
    expect_distribution("top-k 1", &cfg, logits, 5, (const double[]){0, 1, 0, 0, 0});

    /* k at or above the vocabulary keeps everything (sum of weights 10.5). */
    cfg.top_k = 5;
    expect_distribution("top-k 5 of 5", &cfg, logits, 5,
                        (const double[]){1 / 10.5, 4 / 10.5, 2 / 10.5, 3 / 10.5, 0.5 / 10.5});
    cfg.top_k = 1000;
    expect_distribution("top-k 1000 of 5", &cfg, logits, 5,
                        (const double[]){1 / 10.5, 4 / 10.5, 2 / 10.5, 3 / 10.5, 0.5 / 10.5});

    /* Ties at the boundary are all kept, as in HF: weights {4, 1, 2, 2, 0.5}
     * with k = 2 keep 4 and both 2s: 4/8, 2/8, 2/8. */
    const double tied[5] = {4, 1, 2, 2, 0.5};
    float tied_logits[5];
    logits_from_weights(tied, 5, tied_logits);
    cfg.top_k = 2;
    expect_distribution("top-k 2 with a tie", &cfg, tied_logits, 5, (const double[]){0.5, 0, 0.25, 0.25, 0});
}

static void test_top_p(void) {
    /* Probabilities 0.1, 0.2, 0.3, 0.4. From the least probable up, the
     * running totals are 0.1, 0.3, 0.6, 1.0; a token goes while its total is
     * <= 1 - top_p. */
    const double w[4] = {1, 2, 3, 4};
    float logits[4];
    logits_from_weights(w, 4, logits);

    /* top_p 0.75: 1 - top_p = 0.25 drops 0.1 only: 2/9, 3/9, 4/9. */
    SamplerConfig cfg = config(1, 0, 0.75, 0, 1);
    expect_distribution("top-p 0.75", &cfg, logits, 4, (const double[]){0, 2 / 9.0, 3 / 9.0, 4 / 9.0});

    /* top_p 0.65: 0.35 drops 0.1 and 0.2 (total 0.3): 3/7, 4/7. */
    cfg.top_p = 0.65;
    expect_distribution("top-p 0.65", &cfg, logits, 4, (const double[]){0, 0, 3 / 7.0, 4 / 7.0});

    /* top_p 0.35: 0.65 drops three (total 0.6): the 0.4 alone. */
    cfg.top_p = 0.35;
    expect_distribution("top-p 0.35", &cfg, logits, 4, (const double[]){0, 0, 0, 1});

    /* A tiny top_p drops all but the most probable, which always stays. */
    cfg.top_p = 1e-9;
    expect_distribution("top-p 1e-9", &cfg, logits, 4, (const double[]){0, 0, 0, 1});

    /* top_p 1 is off. */
    cfg.top_p = 1;
    expect_distribution("top-p 1", &cfg, logits, 4, (const double[]){0.1, 0.2, 0.3, 0.4});

    /* Exactly on the boundary, with four equal logits (probabilities exactly
     * 0.25, totals exactly 0.25, 0.5, 0.75, 1; among equals the higher id
     * ranks lower). top_p 0.5: the totals 0.25 and 0.5 are <= 0.5, so ids 3
     * and 2 go and ids 0, 1 stay - their mass reaches top_p exactly and
     * stops there. */
    float equal[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    cfg.top_p = 0.5;
    expect_distribution("top-p 0.5 of 4 equal", &cfg, equal, 4, (const double[]){0.5, 0.5, 0, 0});
    /* A hair more and a third is needed. */
    cfg.top_p = 0.5 + 1e-6;
    expect_distribution("top-p 0.500001 of 4 equal", &cfg, equal, 4, (const double[]){1 / 3.0, 1 / 3.0, 1 / 3.0, 0});
    /* 0.25 of 4 equal: the first alone. */
    cfg.top_p = 0.25;
    expect_distribution("top-p 0.25 of 4 equal", &cfg, equal, 4, (const double[]){1, 0, 0, 0});
    /* 0.375 of 8 equal (eighths): totals 1/8 ... 5/8 go, three stay. */
    cfg.top_p = 0.375;
    expect_distribution("top-p 0.375 of 8 equal", &cfg, equal, 8,
                        (const double[]){1 / 3.0, 1 / 3.0, 1 / 3.0, 0, 0, 0, 0, 0});
    /* Tiny top_p with equal logits: the lowest id. */
    cfg.top_p = 1e-9;
    expect_distribution("top-p 1e-9 of 8 equal", &cfg, equal, 8, (const double[]){1, 0, 0, 0, 0, 0, 0, 0});
    /* Likewise with 25, where each probability (1/25 rounded to float) is
     * below 1/25, so even the most probable is under the pre-filter's bar. */
    float equal25[25] = {0};
    double first25[25] = {1};
    expect_distribution("top-p 1e-9 of 25 equal", &cfg, equal25, 25, first25);
}

static void test_min_p(void) {
    /* Probabilities 0.1, 0.2, 0.3, 0.4: the cutoff is min_p * 0.4. */
    const double w[4] = {1, 2, 3, 4};
    float logits[4];
    logits_from_weights(w, 4, logits);

    /* min_p 0.6: cutoff 0.24 keeps 0.3 and 0.4: 3/7, 4/7. */
    SamplerConfig cfg = config(1, 0, 1, 0.6, 1);
    expect_distribution("min-p 0.6", &cfg, logits, 4, (const double[]){0, 0, 3 / 7.0, 4 / 7.0});
    /* min_p 0.2: cutoff 0.08 keeps all. */
    cfg.min_p = 0.2;
    expect_distribution("min-p 0.2", &cfg, logits, 4, (const double[]){0.1, 0.2, 0.3, 0.4});
    /* min_p 0.8: cutoff 0.32 keeps the most probable alone. */
    cfg.min_p = 0.8;
    expect_distribution("min-p 0.8", &cfg, logits, 4, (const double[]){0, 0, 0, 1});
    /* min_p 1 with equal logits: each sits exactly on the cutoff and stays
     * (only tokens below it go). */
    float equal[3] = {0, 0, 0};
    cfg.min_p = 1;
    expect_distribution("min-p 1 of 3 equal", &cfg, equal, 3, (const double[]){1 / 3.0, 1 / 3.0, 1 / 3.0});
}

static void test_impossible_token(void) {
    /* A logit of -inf stays a candidate of probability 0 until a filter drops
     * it, and is never drawn: {-inf, 0, ln 3} gives 0, 0.25, 0.75. */
    const float logits[3] = {-INFINITY, 0, (float)log(3)};
    SamplerConfig cfg = config(1, 0, 1, 0, 1);
    SamplerCandidate got[3];
    size_t n = run_candidates(&cfg, logits, 3, NULL, 0, got);
    CHECK(n == 3 && got[0].prob == 0 && fabs(got[1].prob - 0.25) < 1e-6 && fabs(got[2].prob - 0.75) < 1e-6,
          "-inf: probabilities 0, 0.25, 0.75");
    /* Top-p 0.9 drops it (its running total, 0, is <= 0.1). */
    cfg.top_p = 0.9;
    expect_distribution("-inf under top-p 0.9", &cfg, logits, 3, (const double[]){0, 0.25, 0.75});
    Error e;
    cfg.top_p = 1;
    Sampler *s = sampler_new(&cfg, 3, &e);
    int drawn = 0;
    for (int i = 0; i < 10000; i++) {
        float work[3] = {logits[0], logits[1], logits[2]};
        drawn += sampler_sample(s, work, NULL, 0, 0) == 0;
    }
    CHECK(drawn == 0, "-inf never drawn in 10,000 draws (%d times)", drawn);
    sampler_free(s);
}

static void test_order_of_steps(void) {
    /* Weights 1..6 at T = 0.5 become 1, 4, 9, 16, 25, 36. Top-k 4 keeps
     * 9, 16, 25, 36 (sum 86); top-p 0.6 then sees 0.105, 0.186, 0.291, 0.419
     * with running totals 0.105, 0.291, 0.581, 1, and 1 - 0.6 = 0.4 drops the
     * first two; what is left is 25/61 = 0.410 and 36/61 = 0.590. */
    const double w[6] = {1, 2, 3, 4, 5, 6};
    float logits[6];
    logits_from_weights(w, 6, logits);
    SamplerConfig cfg = config(0.5, 4, 0.6, 0, 1);
    expect_distribution("T, top-k, top-p", &cfg, logits, 6, (const double[]){0, 0, 0, 0, 25 / 61.0, 36 / 61.0});

    /* Min-p judges what top-p left: 0.6 * 0.590 = 0.354 keeps both, while
     * 0.7 * 0.590 = 0.413 drops 0.410. */
    cfg.min_p = 0.6;
    expect_distribution("... min-p 0.6", &cfg, logits, 6, (const double[]){0, 0, 0, 0, 25 / 61.0, 36 / 61.0});
    cfg.min_p = 0.7;
    expect_distribution("... min-p 0.7", &cfg, logits, 6, (const double[]){0, 0, 0, 0, 0, 1});

    /* Top-p after top-k works on the renormalised top k. Weights 1..6 at
     * T = 1 (sum 21): top-p 0.7 alone drops running totals up to 0.3, that
     * is weights 1..3 (6/21 = 0.286), and keeps 4, 5, 6 (sum 15). After
     * top-k 3 it sees 4/15 = 0.267, 5/15, 6/15 and drops 4 as well. */
    cfg = config(1, 0, 0.7, 0, 1);
    expect_distribution("top-p 0.7 alone", &cfg, logits, 6, (const double[]){0, 0, 0, 4 / 15.0, 5 / 15.0, 6 / 15.0});
    cfg.top_k = 3;
    expect_distribution("top-k 3 then top-p 0.7", &cfg, logits, 6, (const double[]){0, 0, 0, 0, 5 / 11.0, 6 / 11.0});
}

static void test_trace(void) {
    /* Weights 1..6 (logits log w), T = 0.5: 1, 4, 9, 16, 25, 36 (sum 91).
     * Top-k 4 keeps 9, 16, 25, 36 (sum 86); min-p 0.5 then keeps what is at
     * least half of 36/86: 25 and 36 (sum 61). Each stage's top is listed,
     * and the token drawn (5 or 6) gets its probability at every stage. */
    const double w[6] = {1, 2, 3, 4, 5, 6};
    float logits[6];
    logits_from_weights(w, 6, logits);
    SamplerConfig cfg = config(0.5, 4, 1, 0.5, 1);
    Error e;
    Sampler *s = sampler_new(&cfg, 6, &e);
    SamplerTrace trace;
    sampler_set_trace(s, &trace);
    int id = sampler_sample(s, logits, NULL, 0, 0);
    sampler_free(s);
    const char *names[] = {"model", "temperature", "top-k", "min-p"};
    const int left[] = {6, 6, 4, 2};
    const double sums[] = {21, 91, 86, 61};
    CHECK(trace.n_stages == 4, "four stages ran, got %d", trace.n_stages);
    CHECK(trace.chosen == id && (id == 4 || id == 5), "the token drawn, %d, is recorded", id);
    for (int k = 0; k < trace.n_stages && k < 4; k++) {
        const SamplerStage *st = &trace.stages[k];
        double power = k == 0 ? 1 : 2;  /* the weights, squared by T = 0.5 */
        CHECK(strcmp(st->name, names[k]) == 0 && st->n_left == left[k] && st->n == left[k],
              "stage %d: %s with %d left, got %s with %d (%d shown)", k, names[k], left[k], st->name, st->n_left, st->n);
        for (int i = 0; i < st->n; i++) {
            double want = pow(6 - i, power) / sums[k];
            CHECK(st->ids[i] == 5 - i && fabs(st->probs[i] - want) < 1e-6, "stage %s, rank %d: id %d p %g, expected %d %g",
                  st->name, i, st->ids[i], st->probs[i], 5 - i, want);
        }
        double chosen = pow(id + 1, power) / sums[k];
        CHECK(fabs(st->chosen_prob - chosen) < 1e-6, "stage %s: the drawn token's probability %g, expected %g", st->name,
              st->chosen_prob, chosen);
    }
}

static void test_pick(void) {
    const SamplerCandidate c[3] = {{5, 0, 0.25f}, {7, 0, 0.5f}, {9, 0, 0.25f}};
    CHECK(sampler_pick(c, 3, 0.0) == 5, "u = 0 picks the first");
    CHECK(sampler_pick(c, 3, 0.2499999) == 5, "u just under 0.25 picks the first");
    CHECK(sampler_pick(c, 3, 0.25) == 7, "u = 0.25 (a boundary) picks the next");
    CHECK(sampler_pick(c, 3, 0.7499999) == 7, "u just under 0.75 picks the second");
    CHECK(sampler_pick(c, 3, 0.75) == 9, "u = 0.75 picks the third");
    CHECK(sampler_pick(c, 3, 1 - 0x1p-53) == 9, "the largest u picks the last");
    const SamplerCandidate z[4] = {{1, 0, 0}, {2, 0, 1}, {3, 0, 0}, {4, 0, 0}};
    CHECK(sampler_pick(z, 4, 0.0) == 2 && sampler_pick(z, 4, 1 - 0x1p-53) == 2,
          "candidates of probability 0 are never picked");
    /* u is scaled by the total: {0.25, 0.25} splits [0, 1) in halves. */
    const SamplerCandidate half[2] = {{0, 0, 0.25f}, {1, 0, 0.25f}};
    CHECK(sampler_pick(half, 2, 0.4) == 0 && sampler_pick(half, 2, 0.6) == 1, "u is scaled by the total");
}

/* ---- the brute-force reference ---- */

typedef struct {
    int id;
    double logit, prob;
} Ref;

static int by_logit_descending(const void *a, const void *b) {
    const Ref *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* Least probable first; among equals the higher id first. */
static int by_prob_ascending(const void *a, const void *b) {
    const Ref *x = a, *y = b;
    if (x->prob != y->prob) return x->prob < y->prob ? -1 : 1;
    return y->id - x->id;
}

static int by_id(const void *a, const void *b) { return ((const Ref *)a)->id - ((const Ref *)b)->id; }

static void ref_softmax(Ref *r, size_t n) {
    double max = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) max = fmax(max, r[i].logit);
    for (size_t i = 0; i < n; i++) sum += r[i].prob = exp(r[i].logit - max);
    for (size_t i = 0; i < n; i++) r[i].prob /= sum;
}

/* Every rule applied literally, in double, sorting the whole vocabulary:
 * returns the candidates left in r (by id) and their number. */
static size_t reference(const SamplerConfig *cfg, const float *logits, int n, const int *context, size_t n_context,
                        Ref *r) {
    for (int i = 0; i < n; i++) {
        double x = logits[i];
        int seen = 0;
        for (size_t j = 0; j < n_context && !seen; j++) seen = context[j] == i;
        if (seen) x = x > 0 ? x / cfg->repeat_penalty : x * cfg->repeat_penalty;
        r[i] = (Ref){i, x, 0};
    }
    size_t m = (size_t)n;
    if (cfg->temperature == 0) {
        qsort(r, m, sizeof *r, by_logit_descending);
        r[0].prob = 1;
        return 1;
    }
    for (size_t i = 0; i < m; i++) r[i].logit /= cfg->temperature;
    if (cfg->top_k > 0 && (size_t)cfg->top_k < m) {
        qsort(r, m, sizeof *r, by_logit_descending);
        double kth = r[cfg->top_k - 1].logit;
        while (m > (size_t)cfg->top_k && r[m - 1].logit < kth) m--;
    }
    if (cfg->top_p < 1) {
        ref_softmax(r, m);
        qsort(r, m, sizeof *r, by_prob_ascending);
        double total = 0;
        size_t drop = 0;
        while (drop < m - 1 && (total += r[drop].prob) <= 1 - cfg->top_p) drop++;
        memmove(r, r + drop, (m - drop) * sizeof *r);
        m -= drop;
    }
    if (cfg->min_p > 0) {
        ref_softmax(r, m);
        double max = 0;
        for (size_t i = 0; i < m; i++) max = fmax(max, r[i].prob);
        size_t kept = 0;
        for (size_t i = 0; i < m; i++)
            if (r[i].prob >= cfg->min_p * max) r[kept++] = r[i];
        m = kept;
    }
    ref_softmax(r, m);
    qsort(r, m, sizeof *r, by_id);
    return m;
}

/* Compares the sampler with the reference on one case: the same candidates,
 * the same probabilities, and the same token for each of n_draws numbers u. */
static void compare_with_reference(const char *what, const SamplerConfig *cfg, const float *logits, int n,
                                   const int *context, size_t n_context, int n_draws) {
    SamplerCandidate *got = malloc((size_t)n * sizeof *got);
    Ref *want = malloc((size_t)n * sizeof *want);
    size_t count = run_candidates(cfg, logits, n, context, n_context, got);
    size_t want_count = reference(cfg, logits, n, context, n_context, want);
    int same = count == want_count;
    double worst = 0;
    for (size_t i = 0; same && i < count; i++) {
        same = got[i].id == want[i].id;
        worst = fmax(worst, fabs(got[i].prob - want[i].prob));
    }
    CHECK(same, "%s: the reference's %zu candidates (got %zu)", what, want_count, count);
    CHECK(worst < 2e-6, "%s: probabilities within 2e-6 of the reference (worst %g)", what, worst);

    Rng rng;
    rng_seed(&rng, 99);
    int agree = 1;
    for (int i = 0; same && i < n_draws; i++) {
        double u = rng_uniform(&rng), running = 0;
        int ref_token = want[want_count - 1].id;
        for (size_t j = 0; j < want_count; j++) {
            running += want[j].prob;
            if (running > u) {
                ref_token = want[j].id;
                break;
            }
        }
        agree &= sampler_pick(got, count, u) == ref_token;
    }
    CHECK(agree, "%s: the same token as the reference for %d draws", what, n_draws);
    free(got);
    free(want);
}

/* A normal deviate by Box-Muller. */
static double gaussian(Rng *rng) {
    double u = rng_uniform(rng), v = rng_uniform(rng);
    return sqrt(-2 * log(1 - u)) * cos(2 * M_PI * v);
}

static void test_small_random_cases(void) {
    const double temperatures[] = {0, 0.3, 0.7, 1, 1.5};
    const int top_ks[] = {0, 1, 3, 10, 50};
    const double top_ps[] = {0.1, 0.5, 0.8, 0.95, 1};
    const double min_ps[] = {0, 0.05, 0.3};
    const double penalties[] = {1, 1.3, 0.8};
    Rng rng;
    rng_seed(&rng, 2024);
    int agree = 0, trials = 400;
    for (int t = 0; t < trials; t++) {
        int n = 2 + (int)(rng_next(&rng) % 39);
        float logits[40];
        int context[20];
        for (int i = 0; i < n; i++) logits[i] = (float)(2 * gaussian(&rng));
        size_t n_context = rng_next(&rng) % 20;
        for (size_t i = 0; i < n_context; i++) context[i] = (int)(rng_next(&rng) % (uint64_t)n);
        SamplerConfig cfg = config(temperatures[rng_next(&rng) % 5], top_ks[rng_next(&rng) % 5],
                                   top_ps[rng_next(&rng) % 5], min_ps[rng_next(&rng) % 3], penalties[rng_next(&rng) % 3]);
        SamplerCandidate got[40];
        Ref want[40];
        size_t count = run_candidates(&cfg, logits, n, context, n_context, got);
        size_t want_count = reference(&cfg, logits, n, context, n_context, want);
        int same = count == want_count;
        for (size_t i = 0; same && i < count; i++)
            same = got[i].id == want[i].id && fabs(got[i].prob - want[i].prob) < 1e-6;
        if (!same)
            printf("case %d: n %d, T %g, top-k %d, top-p %g, min-p %g, penalty %g: %zu candidates, reference %zu\n",
                   t, n, cfg.temperature, cfg.top_k, cfg.top_p, cfg.min_p, cfg.repeat_penalty, count, want_count);
        agree += same;
    }
    CHECK(agree == trials, "%d random small cases agree with the reference (%d do)", trials, agree);
}

static void test_qwen_sized_vocabulary(void) {
    float *peaked = malloc(QWEN_VOCAB * sizeof *peaked), *flat = malloc(QWEN_VOCAB * sizeof *flat);
    int context[300];
    Rng rng;
    rng_seed(&rng, QWEN_VOCAB);
    /* Like a trained model's: broad noise, and a few dozen tokens far ahead,
     * ten of which the context holds (so the penalty matters). */
    for (int i = 0; i < QWEN_VOCAB; i++) peaked[i] = (float)(2 * gaussian(&rng));
    for (int i = 0; i < 300; i++) context[i] = (int)(rng_next(&rng) % QWEN_VOCAB);
    for (int i = 0; i < 40; i++) {
        int id = (int)(rng_next(&rng) % QWEN_VOCAB);
        peaked[id] += (float)(8 + 4 * rng_uniform(&rng));
        if (i < 10) context[i] = id;
    }
    /* Like an untrained model's: nearly uniform, so top-p keeps most tokens
     * and the quickselect, not the pre-filter, does the work. */
    for (int i = 0; i < QWEN_VOCAB; i++) flat[i] = (float)(0.05 * gaussian(&rng));

    struct {
        const char *what;
        const float *logits;
        SamplerConfig cfg;
        size_t n_context;
    } cases[] = {
        {"peaked, Qwen2.5's defaults", peaked, config(0.7, 20, 0.8, 0, 1.05), 300},
        {"peaked, top-p 0.8 alone", peaked, config(1, 0, 0.8, 0, 1), 0},
        {"peaked, top-p 0.95 and min-p 0.02", peaked, config(0.7, 0, 0.95, 0.02, 1.1), 300},
        {"peaked, top-k 40 alone", peaked, config(1, 40, 1, 0, 1), 0},
        {"peaked, min-p 0.05 alone", peaked, config(1, 0, 1, 0.05, 1), 0},
        {"peaked, no filter", peaked, config(1, 0, 1, 0, 1), 0},
        {"peaked, greedy with penalty", peaked, config(0, 0, 1, 0, 1.3), 300},
        {"flat, Qwen2.5's defaults", flat, config(0.7, 20, 0.8, 0, 1.05), 300},
        {"flat, top-p 0.8 alone", flat, config(1, 0, 0.8, 0, 1), 0},
        {"flat, top-p 0.5 at T 1.3", flat, config(1.3, 0, 0.5, 0, 1), 0},
        {"flat, no filter", flat, config(1, 0, 1, 0, 1), 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compare_with_reference(cases[i].what, &cases[i].cfg, cases[i].logits, QWEN_VOCAB, context, cases[i].n_context,
                               1000);
    free(peaked);
    free(flat);
}

/* ---- seeds and frequencies ---- */

enum { TOY_VOCAB = 1000 };

/* A toy language model: the next logits depend on the last token. */
static void toy_logits(int last, float *logits) {
    for (int i = 0; i < TOY_VOCAB; i++) logits[i] = (float)(3 * sin(0.37 * i * (last + 1)));
}

/* Generates n tokens with the settings, each fed back as context. */
static void generate(const SamplerConfig *cfg, int *tokens, int n) {
    Error e;
    Sampler *s = sampler_new(cfg, TOY_VOCAB, &e);
    float logits[TOY_VOCAB];
    for (int t = 0; t < n; t++) {
        toy_logits(t ? tokens[t - 1] : 0, logits);
        tokens[t] = sampler_sample(s, logits, tokens, (size_t)t, 0);
    }
    sampler_free(s);
}

static void test_seeds(void) {
    int a[200], b[200], c[200];
    SamplerConfig cfg = config(0.9, 50, 0.95, 0.01, 1.1);
    cfg.seed = 7;
    generate(&cfg, a, 200);
    generate(&cfg, b, 200);
    CHECK(memcmp(a, b, sizeof a) == 0, "the same seed gives the same 200 tokens");
    cfg.seed = 8;
    generate(&cfg, c, 200);
    int differ = 0;
    for (int i = 0; i < 200; i++) differ += a[i] != c[i];
    CHECK(differ > 100, "another seed gives another sequence (%d of 200 tokens differ)", differ);

    /* Each step draws one number from splitmix64 seeded with the seed, and
     * picks with it among the step's candidates. */
    cfg.seed = 7;
    Error e;
    Sampler *probe = sampler_new(&cfg, TOY_VOCAB, &e);
    Rng rng;
    rng_seed(&rng, 7);
    float logits[TOY_VOCAB];
    int replayed = 0;
    for (int t = 0; t < 200; t++) {
        toy_logits(t ? a[t - 1] : 0, logits);
        const SamplerCandidate *cand;
        size_t n = sampler_candidates(probe, logits, a, (size_t)t, 0, &cand);
        replayed += sampler_pick(cand, n, rng_uniform(&rng)) == a[t];
    }
    CHECK(replayed == 200, "the sequence replays from rng_uniform and sampler_pick (%d of 200)", replayed);
    sampler_free(probe);

    /* Greedy draws nothing: any seed, one sequence. */
    cfg = config(0, 0, 1, 0, 1.1);
    cfg.seed = 1;
    generate(&cfg, a, 50);
    cfg.seed = 2;
    generate(&cfg, b, 50);
    CHECK(memcmp(a, b, 50 * sizeof *a) == 0, "greedy does not depend on the seed");
}

/* Draws 100,000 tokens and compares the counts with want[] by Pearson's
 * chi-square; `critical` is the value exceeded with probability 0.001. The
 * seed is fixed, so the outcome is too. */
static void check_frequencies(const char *what, const SamplerConfig *cfg, const double *weights, int n,
                              const double *want, double critical) {
    enum { DRAWS = 100000 };
    Error e;
    Sampler *s = sampler_new(cfg, n, &e);
    float logits[16], work[16];
    long counts[16] = {0};
    logits_from_weights(weights, n, logits);
    for (int i = 0; i < DRAWS; i++) {
        memcpy(work, logits, (size_t)n * sizeof *work);
        counts[sampler_sample(s, work, NULL, 0, 0)]++;
    }
    sampler_free(s);
    double chi2 = 0;
    long stray = 0;
    for (int i = 0; i < n; i++) {
        if (want[i] == 0) {
            stray += counts[i];
            continue;
        }
        double expected = DRAWS * want[i];
        chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    CHECK(stray == 0, "%s: filtered tokens never drawn (%ld were)", what, stray);
    CHECK(chi2 < critical, "%s: chi-square %.2f is under %.2f", what, chi2, critical);
}

static void test_frequencies(void) {
    const double w[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    double plain[10];
    for (int i = 0; i < 10; i++) plain[i] = w[i] / 55;
    SamplerConfig cfg = config(1, 0, 1, 0, 1);
    cfg.seed = 12345;
    check_frequencies("no filter, 9 degrees of freedom", &cfg, w, 10, plain, 27.88);

    /* Top-k 8 keeps weights 3..10 (sum 52); top-p 0.9 drops 3/52 = 0.058
     * (<= 0.1) but not 3/52 + 4/52 = 0.135: weights 4..10 remain, sum 49. */
    double filtered[10] = {0};
    for (int i = 3; i < 10; i++) filtered[i] = w[i] / 49;
    cfg = config(1, 8, 0.9, 0, 1);
    cfg.seed = 54321;
    check_frequencies("top-k 8, top-p 0.9, 6 degrees of freedom", &cfg, w, 10, filtered, 22.46);
}

/* The mask: a token it leaves out is never chosen, greedy or drawn, and
 * the ones it keeps share the probability as a softmax over them alone. */
static void test_mask(void) {
    SamplerConfig cfg = config(0, 0, 1, 0, 1);
    Error e;
    Sampler *s = sampler_new(&cfg, 70, &e);
    uint64_t mask[2] = {1u << 3 | 1u << 5, 1u << 2};  /* ids 3, 5 and 66 */
    float logits[70];
    for (int i = 0; i < 70; i++) logits[i] = (float)i / 10;
    sampler_set_mask(s, mask);
    CHECK(sampler_sample(s, logits, NULL, 0, 0) == 66, "greedy: the best allowed token (66, not 69)");
    logits[66] = -1;
    logits[5] = 0.5f;
    CHECK(sampler_sample(s, logits, NULL, 0, 0) == 5, "greedy: the best allowed token (5)");
    sampler_free(s);
    cfg = config(1, 0, 1, 0, 1);
    s = sampler_new(&cfg, 70, &e);
    sampler_set_mask(s, mask);
    for (int i = 0; i < 70; i++) logits[i] = 0;
    const SamplerCandidate *c;
    size_t n = sampler_candidates(s, logits, NULL, 0, 0, &c);
    double allowed = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].id == 3 || c[i].id == 5 || c[i].id == 66) allowed += c[i].prob;
        else other += c[i].prob;
    }
    CHECK(fabs(allowed - 1) < 1e-6 && other == 0, "drawn: the allowed tokens hold all the probability (%g, %g)", allowed, other);
    for (int k = 0; k < 200; k++) {
        for (int i = 0; i < 70; i++) logits[i] = 0;
        int id = sampler_sample(s, logits, NULL, 0, 0);
        if (id != 3 && id != 5 && id != 66) {
            CHECK(false, "drew %d, which the mask leaves out", id);
            break;
        }
    }
    sampler_set_mask(s, NULL);
    for (int i = 0; i < 70; i++) logits[i] = i == 69 ? 100 : 0;
    CHECK(sampler_sample(s, logits, NULL, 0, 0) == 69, "the mask removed: every token again");
    sampler_free(s);
}

/* OpenAI's presence and frequency penalties count the generated tokens
 * only; the logit bias is added first of all. Worked out by hand. */
static void test_openai_penalties_and_bias(void) {
    /* Context: the prompt {2, 2}, then generated {0, 0, 0, 1, 7} (7 is
     * outside a vocabulary of 4). Frequency 0.5, presence 0.25: token 0
     * (3 times) 1 - 3 * 0.5 - 0.25 = -0.75; token 1 (once) 1 - 0.5 - 0.25 =
     * 0.25; token 2 is in the prompt only, token 3 nowhere: both stay 1. */
    const int context[] = {2, 2, 0, 0, 0, 1, 7};
    SamplerConfig cfg = config(1, 0, 1, 0, 1);
    cfg.frequency_penalty = 0.5;
    cfg.presence_penalty = 0.25;
    Error e;
    Sampler *s = sampler_new(&cfg, 4, &e);
    float logits[4] = {1, 1, 1, 1};
    const SamplerCandidate *c;
    sampler_candidates(s, logits, context, 7, 5, &c);
    CHECK(logits[0] == -0.75f && logits[1] == 0.25f && logits[2] == 1 && logits[3] == 1,
          "frequency 0.5, presence 0.25: %g %g %g %g (want -0.75 0.25 1 1)", logits[0], logits[1], logits[2], logits[3]);
    /* The counts start over each step: the same call gives the same logits. */
    float again[4] = {1, 1, 1, 1};
    sampler_candidates(s, again, context, 7, 5, &c);
    CHECK(memcmp(again, logits, sizeof again) == 0, "the next step counts afresh");
    sampler_free(s);
    /* Negative values favour what was generated: 1 + 3 * 1 + 2 = 6 and 1 + 1 + 2 = 4. */
    cfg.frequency_penalty = -1;
    cfg.presence_penalty = -2;
    s = sampler_new(&cfg, 4, &e);
    float favour[4] = {1, 1, 1, 1};
    sampler_candidates(s, favour, context, 7, 5, &c);
    CHECK(favour[0] == 6 && favour[1] == 4 && favour[2] == 1, "negative penalties favour: %g %g %g", favour[0], favour[1], favour[2]);
    sampler_free(s);

    /* Bias {1: +2.5, 3: -100} on equal logits: weights 1, e^2.5, 1, e^-100. */
    const LogitBias bias[] = {{1, 2.5f}, {3, -100}};
    cfg = config(1, 0, 1, 0, 1);
    cfg.bias = bias;
    cfg.n_bias = 2;
    s = sampler_new(&cfg, 4, &e);
    float flat[4] = {0, 0, 0, 0};
    size_t n = sampler_candidates(s, flat, NULL, 0, 0, &c);
    double total = 2 + exp(2.5) + exp(-100);
    CHECK(n == 4 && flat[1] == 2.5f && flat[3] == -100 && fabs(c[0].prob - 1 / total) < 1e-6 &&
              fabs(c[1].prob - exp(2.5) / total) < 1e-6 && c[3].prob < 1e-40,
          "bias 2.5 and -100: probabilities %g %g %g %g", c[0].prob, c[1].prob, c[2].prob, c[3].prob);
    sampler_free(s);
    /* Greedy: -100 on the best token hands the step to the second. */
    const LogitBias ban[] = {{2, -100}};
    cfg = config(0, 0, 1, 0, 1);
    cfg.bias = ban;
    cfg.n_bias = 1;
    s = sampler_new(&cfg, 4, &e);
    float best[4] = {0.5f, 3, 9, 1};
    CHECK(sampler_sample(s, best, NULL, 0, 0) == 1, "greedy with token 2 banned: token 1");
    /* A token the mask rules out stays out, whatever its bias. */
    const LogitBias push[] = {{0, 100}};
    sampler_free(s);
    cfg.bias = push;
    s = sampler_new(&cfg, 4, &e);
    uint64_t mask[1] = {1u << 1 | 1u << 2};
    sampler_set_mask(s, mask);
    float masked[4] = {0, 1, 2, 0};
    CHECK(sampler_sample(s, masked, NULL, 0, 0) == 2 && masked[0] == -INFINITY, "bias +100 on a masked token: still out");
    sampler_free(s);
    /* The bias comes before the repetition penalty: (1 + 1) / 2 = 1, not 1 / 2 + 1. */
    const LogitBias one[] = {{0, 1}};
    cfg = config(1, 0, 1, 0, 2);
    cfg.bias = one;
    cfg.n_bias = 1;
    s = sampler_new(&cfg, 2, &e);
    float order[2] = {1, 0};
    const int seen[] = {0};
    sampler_candidates(s, order, seen, 1, 0, &c);
    CHECK(order[0] == 1, "bias, then the repetition penalty: %g (want 1)", order[0]);
    sampler_free(s);
    /* Refused: a bias outside [-100, 100], a token outside the vocabulary. */
    const LogitBias big[] = {{0, 100.5f}}, far[] = {{4, 1}};
    cfg.bias = big;
    CHECK(sampler_new(&cfg, 4, &e) == NULL && strstr(e.msg, "[-100, 100]"), "bias 100.5: refused (%s)", e.msg);
    cfg.bias = far;
    CHECK(sampler_new(&cfg, 4, &e) == NULL && strstr(e.msg, "token 4"), "bias for token 4 of 4: refused (%s)", e.msg);
}

int main(void) {
    test_config();
    test_mask();
    test_rng();
    test_greedy();
    test_argmax_lanes();
    test_repetition_penalty();
    test_openai_penalties_and_bias();
    test_temperature();
    test_top_k();
    test_top_p();
    test_min_p();
    test_impossible_token();
    test_order_of_steps();
    test_trace();
    test_pick();
    test_small_random_cases();
    test_qwen_sized_vocabulary();
    test_seeds();
    test_frequencies();
    return test_summary("test_sampler");
}
