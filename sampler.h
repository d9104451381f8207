/* sampler.h - turns one step's logits into the next token id, the way
 * Hugging Face transformers' `generate` does it:
 *
 *   logit bias, penalties, then either argmax (temperature 0) or
 *   temperature -> top-k -> top-p -> min-p -> a draw from what remains,
 *
 * with a seeded random generator of our own, so that a seed gives the same
 * tokens on any machine (for the same logits). */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* ---- random numbers ---- */

/* splitmix64 (Steele, Lea and Flood, 2014): 64 bits of state, any seed
 * (0 too) gives a good stream, and the arithmetic is plain 64-bit integer
 * arithmetic, so the stream is the same everywhere. */
typedef struct {
    uint64_t state;
} Rng;

void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next(Rng *rng);

/* A number in [0, 1): the top 53 bits of rng_next() as an integer, times
 * 2^-53. Both steps are exact in a double, so no rounding can differ. */
double rng_uniform(Rng *rng);

/* ---- ranking logits ---- */

/* The index of the largest of x[0..n); on a tie the lowest, as torch.argmax
 * (NaNs are passed over; x[0] when every value is NaN or -inf). */
int argmax(const float *x, int n);

/* The indices of the k largest of x[0..n) into ids, largest first (on a tie
 * the lower index first); returns how many, min(k, n). */
int top_indices(int *ids, int k, const float *x, int n);

/* ---- the sampler ---- */

/* One entry of OpenAI's logit_bias: added to a token's logit. */
typedef struct {
    int id;
    float bias;             /* in [-100, 100]; -100 all but bans the token, 100 all but forces it */
} LogitBias;

/* The settings, as the user gives them. */
typedef struct {
    double temperature;     /* 0 = greedy (argmax); else >= 1e-6, logits are divided by it */
    int top_k;              /* keep the k most probable tokens (and any tied with
                               the k-th, as HF does); 0 = off */
    double top_p;           /* in (0, 1]: keep the fewest most probable tokens whose
                               probabilities add up to top_p; 1 = off */
    double min_p;           /* in [0, 1]: keep tokens at least min_p times as probable
                               as the most probable one; 0 = off */
    double repeat_penalty;  /* > 0: weighs against tokens already in the context
                               (> 1 discourages them, < 1 favours them); 1 = off */
    double presence_penalty;   /* in [-2, 2], OpenAI's: subtracted from the logit of
                                  every token generated so far; 0 = off */
    double frequency_penalty;  /* in [-2, 2], OpenAI's: subtracted once per time a
                                  token was generated so far; 0 = off */
    uint64_t seed;          /* seeds the random generator */
    const LogitBias *bias;  /* [n_bias] added to the logits first (sampler_new copies them) */
    int n_bias;
} SamplerConfig;

/* A token still in the running after the filters. */
typedef struct {
    int id;
    float logit;  /* after the repetition penalty and the temperature */
    float prob;   /* its probability among the candidates that remain */
} SamplerCandidate;

typedef struct Sampler Sampler;

/* ---- watching the sampler work ---- */

enum { SAMPLER_TRACE_TOP = 10, SAMPLER_MAX_STAGES = 6 };

/* The most probable tokens of one stage's distribution (the softmax of the
 * logits at that point), most probable first. */
typedef struct {
    const char *name;       /* "model", "penalties" (with the logit bias), "temperature", "top-k", "top-p", "min-p" */
    int n;                  /* entries in ids and probs (fewer when fewer tokens are left) */
    int ids[SAMPLER_TRACE_TOP];
    float probs[SAMPLER_TRACE_TOP];
    int n_left;             /* tokens still in the running at this stage */
    float chosen_prob;      /* the probability of the token drawn in the end (0: filtered out) */
} SamplerStage;

/* What one step did: the distribution after each stage that ran, in order
 * (the first is the model's own), and the token chosen. */
typedef struct {
    int n_stages;
    SamplerStage stages[SAMPLER_MAX_STAGES];
    int chosen;
} SamplerTrace;

/* When trace is not NULL, every later sampler_sample fills it (extra work: a
 * softmax and a copy of the logits per stage); NULL stops it. */
void sampler_set_trace(Sampler *s, SamplerTrace *trace);

/* Constrained decoding's hook: with a mask, only the tokens whose bit is
 * set (mask[id / 64] >> (id % 64) & 1) can be chosen; every other logit is
 * made -inf before the bias, the penalties and the filters. The mask is read by each
 * later sampler_sample / sampler_candidates and must stay valid until
 * removed (NULL). It must allow at least one token. */
void sampler_set_mask(Sampler *s, const uint64_t *mask);

/* Checks every setting's range; on a bad one returns -1 with e.g.
 * "top-p must be in (0, 1] (1 = off), got 1.5" in e. */
int sampler_check_config(const SamplerConfig *cfg, Error *e);

/* A sampler for a vocabulary of vocab_size tokens, seeded with cfg->seed, or
 * NULL with the reason in e when cfg does not pass sampler_check_config or
 * a bias names a token outside the vocabulary. */
Sampler *sampler_new(const SamplerConfig *cfg, int vocab_size, Error *e);
void sampler_free(Sampler *s);

/* The next token, given this step's logits[vocab_size] and the context so far
 * (prompt + generated ids, for the repetition penalty; ids outside the
 * vocabulary are ignored), of which the last n_generated were generated (for
 * the presence and frequency penalties). Draws exactly one random number per
 * call, none when greedy.
 *
 * The logits are modified in place: they come back with the repetition
 * penalty applied and divided by the temperature. They must not hold NaN,
 * and at least one must be finite. */
int sampler_sample(Sampler *s, float *logits, const int *context, size_t n_context, size_t n_generated);

/* Everything sampler_sample does but the draw: penalises, filters and
 * normalises, and points *out at the candidates left, in ascending id order,
 * with probabilities that sum to 1 (when greedy: the argmax alone). A logit
 * of -inf, or one far below the rest, can leave a candidate of probability
 * 0. Returns their number. *out is the sampler's own memory, valid until the
 * next call. The logits are modified as for sampler_sample. */
size_t sampler_candidates(Sampler *s, float *logits, const int *context, size_t n_context, size_t n_generated,
                          const SamplerCandidate **out);

/* The draw: the candidate that u in [0, 1) lands on when the probabilities
 * of candidates[0..n) (n > 0) are laid end to end in order - the first whose
 * running total exceeds u times their total. Candidates of probability 0 are
 * never picked. */
int sampler_pick(const SamplerCandidate *candidates, size_t n, double u);

#endif
