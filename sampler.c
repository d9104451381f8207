/* sampler.c - from logits to the next token: the logit bias and the
 * penalties (repetition; OpenAI's presence and frequency), then
 * argmax, or temperature, top-k, top-p and min-p followed by a draw.
 *
 * The steps and their order are Hugging Face's (a logits processor, then the
 * warpers in the order `generate` chains them), and so are their rules at the
 * edges; the comment on each step says how. Where HF leaves an order among
 * equal values unspecified, this file ranks the lower id first.
 *
 * Speed: the vocabulary (151,936 tokens for Qwen2) is never sorted. Top-k
 * finds its threshold with a k-entry heap, top-p drops the surely-dropped in
 * one pass and finds its boundary with a quickselect, and with no filter at
 * all a step is a few linear passes. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ---- */

void rng_seed(Rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t rng_next(Rng *rng) {
    /* Step a counter by an odd constant (2^64 over the golden ratio), then
     * scramble it. */
    return mix64(rng->state += 0x9e3779b97f4a7c15u);
}

double rng_uniform(Rng *rng) { return (double)(rng_next(rng) >> 11) * 0x1p-53; }

/* ---- the sampler's state ---- */

struct Sampler {
    SamplerConfig cfg;
    int vocab_size;
    Rng rng;
    SamplerCandidate *candidates;  /* [vocab_size] the tokens in the running, by ascending id */
    SamplerCandidate *ranked;      /* [vocab_size] top-p's working copy, reordered by quickselect */
    float *heap;                   /* [top_k] top-k's k largest logits seen so far */
    unsigned char *penalized;      /* [vocab_size] 1 for ids already penalised this step */
    int *counts;                   /* [vocab_size] times each id was generated (presence/frequency) */
    SamplerTrace *trace;           /* filled at each step when not NULL */
    const uint64_t *mask;          /* [vocab_size bits] the tokens allowed, or NULL: all */
    LogitBias *bias;               /* [cfg.n_bias] the sampler's copy of cfg.bias */
    float *stage_logits;           /* [SAMPLER_MAX_STAGES][vocab_size] with a trace: each stage's
                                      logits (-inf for tokens out of the running), for chosen_prob */
    double stage_max[SAMPLER_MAX_STAGES], stage_sum[SAMPLER_MAX_STAGES];  /* their max and sum of exp(x - max) */
};

int sampler_check_config(const SamplerConfig *cfg, Error *e) {
    /* Each test is written so that NaN fails it. Below 1e-6, dividing by the
     * temperature could take a large logit past the range of a float. */
    if (!(cfg->temperature == 0 || (cfg->temperature >= 1e-6 && isfinite(cfg->temperature))))
        return fail(e, "temperature must be 0 (greedy) or at least 1e-6, got %g", cfg->temperature);
    if (cfg->top_k < 0) return fail(e, "top-k must be >= 0 (0 = off), got %d", cfg->top_k);
    if (!(cfg->top_p > 0 && cfg->top_p <= 1)) return fail(e, "top-p must be in (0, 1] (1 = off), got %g", cfg->top_p);
    if (!(cfg->min_p >= 0 && cfg->min_p <= 1)) return fail(e, "min-p must be in [0, 1] (0 = off), got %g", cfg->min_p);
    if (!(cfg->repeat_penalty > 0 && isfinite(cfg->repeat_penalty)))
        return fail(e, "repeat penalty must be > 0 (1 = off), got %g", cfg->repeat_penalty);
    if (!(cfg->presence_penalty >= -2 && cfg->presence_penalty <= 2))
        return fail(e, "presence penalty must be in [-2, 2] (0 = off), got %g", cfg->presence_penalty);
    if (!(cfg->frequency_penalty >= -2 && cfg->frequency_penalty <= 2))
        return fail(e, "frequency penalty must be in [-2, 2] (0 = off), got %g", cfg->frequency_penalty);
    if (cfg->n_bias < 0 || (cfg->n_bias > 0 && !cfg->bias)) return fail(e, "the logit bias list is broken");
    for (int i = 0; i < cfg->n_bias; i++)
        if (!(cfg->bias[i].bias >= -100 && cfg->bias[i].bias <= 100))
            return fail(e, "a logit bias must be in [-100, 100], got %g", cfg->bias[i].bias);
    return 0;
}

/* Whether top-k prunes anything: k at least the vocabulary keeps every token. */
static bool top_k_on(const Sampler *s) { return s->cfg.top_k > 0 && s->cfg.top_k < s->vocab_size; }

Sampler *sampler_new(const SamplerConfig *cfg, int vocab_size, Error *e) {
    if (sampler_check_config(cfg, e) != 0) return NULL;
    if (vocab_size <= 0) {
        fail(e, "vocabulary size must be positive, got %d", vocab_size);
        return NULL;
    }
    for (int i = 0; i < cfg->n_bias; i++)
        if (cfg->bias[i].id < 0 || cfg->bias[i].id >= vocab_size) {
            fail(e, "logit bias for token %d, outside the vocabulary of %d", cfg->bias[i].id, vocab_size);
            return NULL;
        }
    Sampler *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->vocab_size = vocab_size;
    rng_seed(&s->rng, cfg->seed);
    s->candidates = xcalloc((size_t)vocab_size, sizeof *s->candidates);
    s->ranked = xcalloc((size_t)vocab_size, sizeof *s->ranked);
    s->heap = xcalloc(top_k_on(s) ? (size_t)cfg->top_k : 0, sizeof *s->heap);
    s->penalized = xcalloc((size_t)vocab_size, 1);
    s->counts = xcalloc((size_t)vocab_size, sizeof *s->counts);
    s->bias = xmalloc(((size_t)cfg->n_bias + 1) * sizeof *s->bias);
    if (cfg->n_bias) memcpy(s->bias, cfg->bias, (size_t)cfg->n_bias * sizeof *s->bias);
    s->cfg.bias = s->bias;
    return s;
}

void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->candidates);
    free(s->ranked);
    free(s->heap);
    free(s->penalized);
    free(s->counts);
    free(s->bias);
    free(s->stage_logits);
    free(s);
}

/* ---- logit bias, penalties and greedy ---- */

/* OpenAI's logit_bias: each entry's value added to its token's logit (a
 * token the mask ruled out stays at -inf). */
static void apply_bias(const Sampler *s, float *logits) {
    for (int i = 0; i < s->cfg.n_bias; i++) logits[s->bias[i].id] += s->bias[i].bias;
}

/* HF's rule: every distinct id of the context has its logit divided by the
 * penalty when positive and multiplied by it when negative (so a penalty > 1
 * makes the token less likely either way), once however often it occurs. */
static void apply_repetition_penalty(Sampler *s, float *logits, const int *context, size_t n_context) {
    if (s->cfg.repeat_penalty == 1) return;
    float penalty = (float)s->cfg.repeat_penalty;
    for (size_t i = 0; i < n_context; i++) {
        int id = context[i];
        if (id < 0 || id >= s->vocab_size || s->penalized[id]) continue;
        s->penalized[id] = 1;
        logits[id] = logits[id] < 0 ? logits[id] * penalty : logits[id] / penalty;
    }
    /* Clear the marks through the context, not the whole vocabulary. */
    for (size_t i = 0; i < n_context; i++)
        if (context[i] >= 0 && context[i] < s->vocab_size) s->penalized[context[i]] = 0;
}

/* OpenAI's presence and frequency penalties, over the generated ids alone:
 * logit -= count * frequency_penalty + (count > 0) * presence_penalty. */
static void apply_openai_penalties(Sampler *s, float *logits, const int *generated, size_t n) {
    if (s->cfg.presence_penalty == 0 && s->cfg.frequency_penalty == 0) return;
    for (size_t i = 0; i < n; i++)
        if (generated[i] >= 0 && generated[i] < s->vocab_size) s->counts[generated[i]]++;
    for (size_t i = 0; i < n; i++) {
        int id = generated[i];
        if (id < 0 || id >= s->vocab_size || s->counts[id] == 0) continue;
        logits[id] -= (float)(s->counts[id] * s->cfg.frequency_penalty + s->cfg.presence_penalty);
        s->counts[id] = 0;  /* once per distinct id; this also clears the counts */
    }
}

/* Decoding takes an argmax of the whole vocabulary for every greedy token;
 * one running maximum is a chain of dependent comparisons, so the scan
 * keeps ARGMAX_LANES of them, lane j over the indices i with i = j (mod
 * ARGMAX_LANES), each with where it was first seen, and then takes the
 * lowest index among the lanes that hold the largest (4x faster here). */
enum { ARGMAX_LANES = 16 };

int argmax(const float *x, int n) {
    float top[ARGMAX_LANES];
    int at[ARGMAX_LANES], i = 0;
    for (int j = 0; j < ARGMAX_LANES; j++) {
        top[j] = -INFINITY;
        at[j] = 0;
    }
    for (; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
        for (int j = 0; j < ARGMAX_LANES; j++) {
            bool larger = x[i + j] > top[j];
            top[j] = larger ? x[i + j] : top[j];
            at[j] = larger ? i + j : at[j];
        }
    float largest = top[0];
    int best = at[0];
    for (int j = 1; j < ARGMAX_LANES; j++)
        if (top[j] > largest || (top[j] == largest && at[j] < best)) {
            largest = top[j];
            best = at[j];
        }
    for (; i < n; i++)
        if (x[i] > largest) {
            largest = x[i];
            best = i;
        }
    return best;
}

int top_indices(int *ids, int k, const float *x, int n) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        /* Insertion: move the smaller ones down, drop the last when full. */
        int at = count < k ? count++ : k;
        while (at > 0 && x[i] > x[ids[at - 1]]) {
            if (at < k) ids[at] = ids[at - 1];
            at--;
        }
        if (at < k) ids[at] = i;
    }
    return count;
}

/* ---- top-k ---- */

/* Restores the min-heap order of heap[0..n) below position i. */
static void sift_down(float *heap, int n, int i) {
    for (;;) {
        int smallest = i, left = 2 * i + 1, right = left + 1;
        if (left < n && heap[left] < heap[smallest]) smallest = left;
        if (right < n && heap[right] < heap[smallest]) smallest = right;
        if (smallest == i) return;
        float t = heap[i];
        heap[i] = heap[smallest];
        heap[smallest] = t;
        i = smallest;
    }
}

/* The k-th largest of x[0..n), 0 < k < n. A min-heap holds the k largest
 * values seen so far with the smallest of them on top, so each further value
 * costs one comparison unless it displaces that one. */
static float kth_largest(const float *x, int n, float *heap, int k) {
    memcpy(heap, x, (size_t)k * sizeof *heap);
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(heap, k, i);
    for (int i = k; i < n; i++) {
        if (x[i] > heap[0]) {
            heap[0] = x[i];
            sift_down(heap, k, 0);
        }
    }
    return heap[0];
}

/* Fills s->candidates with every token, or with top-k only those whose logit
 * is at least the k-th largest: HF keeps every token tied with the k-th, so
 * ties can leave more than k. Returns how many. */
static size_t gather_candidates(Sampler *s, const float *logits) {
    float threshold = top_k_on(s) ? kth_largest(logits, s->vocab_size, s->heap, s->cfg.top_k) : -INFINITY;
    size_t n = 0;
    for (int id = 0; id < s->vocab_size; id++)
        if (logits[id] >= threshold) s->candidates[n++] = (SamplerCandidate){id, logits[id], 0};
    return n;
}

/* ---- probabilities ---- */

/* The ranking top-p works on: a ranks above b when it is more probable, or
 * as probable with a lower id. */
static bool ranks_above(const SamplerCandidate *a, const SamplerCandidate *b) {
    return a->prob > b->prob || (a->prob == b->prob && a->id < b->id);
}

/* Sets each candidate's prob to the softmax of the logits of c[0..n), n > 0.
 * Subtracting the largest logit first keeps exp from overflowing; the sum is
 * kept in double so 151,936 small terms add up accurately. Returns the index
 * of the candidate that ranks first. */
static size_t softmax(SamplerCandidate *c, size_t n) {
    float max = c[0].logit;
    for (size_t i = 1; i < n; i++) max = c[i].logit > max ? c[i].logit : max;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        c[i].prob = expf(c[i].logit - max);
        sum += c[i].prob;
    }
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        c[i].prob = (float)(c[i].prob / sum);
        if (ranks_above(&c[i], &c[top])) top = i;
    }
    return top;
}

/* ---- top-p ---- */

static void swap(SamplerCandidate *a, SamplerCandidate *b) {
    SamplerCandidate t = *a;
    *a = *b;
    *b = t;
}

/* One quickselect step: reorders r[lo..hi) around its middle element (the
 * pivot) into those ranking below the pivot, the pivot, those ranking above.
 * Returns the pivot's new index and the total probability of those below. */
static size_t partition(SamplerCandidate *r, size_t lo, size_t hi, double *mass_below) {
    swap(&r[lo + (hi - lo) / 2], &r[hi - 1]);
    const SamplerCandidate pivot = r[hi - 1];
    size_t below = lo;
    double mass = 0;
    for (size_t i = lo; i < hi - 1; i++) {
        if (ranks_above(&pivot, &r[i])) {
            mass += r[i].prob;
            swap(&r[i], &r[below++]);
        }
    }
    swap(&r[below], &r[hi - 1]);
    *mass_below = mass;
    return below;
}

/* The least probable candidate that top-p keeps among r[0..n) (n > 0, the
 * first-ranked candidate among them), where `dropped` is the probability of
 * the candidates already set aside, all ranking below these.
 *
 * Going up the ranking from the least probable, the running total only grows,
 * so the dropped candidates are a bottom stretch of the ranking and a
 * quickselect can find where it ends without sorting: each step ranks one
 * pivot, whose running total is everything below it, and keeps looking on
 * the side where the boundary lies. Expected time is linear in n. */
static SamplerCandidate least_probable_kept(SamplerCandidate *r, size_t n, double dropped, float removable) {
    /* r[0..lo) are dropped, r[hi..n) kept, r[lo..hi) not yet decided, and
     * each of the three ranks below the next. */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        double mass_below;
        size_t p = partition(r, lo, hi, &mass_below);
        double running = dropped + mass_below + r[p].prob;
        if ((float)running <= removable) {
            dropped = running;
            lo = p + 1;
        } else {
            hi = p;
        }
    }
    /* lo == n: every one would go, but the first-ranked (now last) stays. */
    return r[lo < n ? lo : n - 1];
}

/* Top-p (nucleus), exactly by HF's rule: list the candidates from least to
 * most probable and drop each one while the running total of probabilities,
 * up to and including it, is <= 1 - top_p (compared in float, as HF's float32
 * tensors do); the most probable is always kept. What stays is the fewest
 * most probable candidates whose probabilities add up to top_p or more; a
 * total that lands exactly on top_p stops there. c[0..n) must hold the
 * softmax, c[top] the first-ranked. Returns how many stay, still by id. */
static size_t top_p_filter(Sampler *s, size_t n, size_t top) {
    SamplerCandidate *c = s->candidates;
    float removable = (float)(1.0 - s->cfg.top_p);

    /* A candidate less probable than removable / n is surely dropped: it and
     * those ranking below it are at most n - 1 (the first-ranked is not one
     * of them), none more probable than it, so their running total is under
     * `removable`. Set those aside, counting their mass; with a peaked
     * distribution that is nearly the whole vocabulary. */
    double cutoff = removable / (double)n, dropped = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].prob < cutoff && i != top) dropped += c[i].prob;
        else s->ranked[m++] = c[i];
    }
    SamplerCandidate last = least_probable_kept(s->ranked, m, dropped, removable);

    /* Keep those ranking at or above the boundary, in their id order. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!ranks_above(&last, &c[i])) c[kept++] = c[i];
    return kept;
}

/* ---- min-p ---- */

/* HF's rule: drop the candidates less probable than min_p times the most
 * probable one, c[top] (which therefore always stays). Returns how many stay. */
static size_t min_p_filter(SamplerCandidate *c, size_t n, size_t top, double min_p) {
    float cutoff = (float)min_p * c[top].prob;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].prob >= cutoff) c[kept++] = c[i];
    return kept;
}

/* ---- the trace ---- */

void sampler_set_trace(Sampler *s, SamplerTrace *trace) {
    s->trace = trace;
    if (trace && !s->stage_logits) s->stage_logits = xmalloc((size_t)SAMPLER_MAX_STAGES * s->vocab_size * sizeof(float));
}

/* Records the top of the softmax over some tokens: the candidates c[0..n),
 * or when c is NULL the whole vocabulary with logits[]. */
static void record_stage(Sampler *s, const char *name, const float *logits, const SamplerCandidate *c, size_t n) {
    SamplerTrace *t = s->trace;
    if (!t || t->n_stages == SAMPLER_MAX_STAGES) return;
    SamplerStage *st = &t->stages[t->n_stages++];
    *st = (SamplerStage){.name = name, .n_left = (int)n};
    float *x = (float *)logits;
    if (c) {
        x = xmalloc((n ? n : 1) * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = c[i].logit;
    }
    float max = -INFINITY;
    double sum = 0;
    for (size_t i = 0; i < n; i++) max = fmaxf(max, x[i]);
    for (size_t i = 0; i < n; i++) sum += exp((double)x[i] - max);
    /* The stage's logit of every token, for the chosen one's probability. */
    float *all = s->stage_logits + (size_t)(t->n_stages - 1) * s->vocab_size;
    if (c) {
        for (int i = 0; i < s->vocab_size; i++) all[i] = -INFINITY;
        for (size_t i = 0; i < n; i++) all[c[i].id] = x[i];
    } else {
        memcpy(all, x, (size_t)s->vocab_size * sizeof *all);
    }
    s->stage_max[t->n_stages - 1] = max;
    s->stage_sum[t->n_stages - 1] = sum;
    st->n = top_indices(st->ids, SAMPLER_TRACE_TOP, x, (int)n);
    for (int i = 0; i < st->n; i++) {
        st->probs[i] = (float)(exp((double)x[st->ids[i]] - max) / sum);
        if (c) st->ids[i] = c[st->ids[i]].id;
    }
    if (c) free(x);
}

/* The token drawn, and its probability at each stage. */
static void record_choice(Sampler *s, int id) {
    SamplerTrace *t = s->trace;
    t->chosen = id;
    for (int k = 0; k < t->n_stages; k++) {
        float x = s->stage_logits[(size_t)k * s->vocab_size + id];
        t->stages[k].chosen_prob = x == -INFINITY ? 0 : (float)(exp((double)x - s->stage_max[k]) / s->stage_sum[k]);
    }
}

/* ---- the steps together ---- */

void sampler_set_mask(Sampler *s, const uint64_t *mask) { s->mask = mask; }

/* Rules out the tokens the mask does not allow. */
static void apply_mask(const Sampler *s, float *logits) {
    for (int i = 0; i < s->vocab_size; i++)
        if (!(s->mask[i >> 6] >> (i & 63) & 1)) logits[i] = -INFINITY;
}

size_t sampler_candidates(Sampler *s, float *logits, const int *context, size_t n_context, size_t n_generated,
                          const SamplerCandidate **out) {
    const SamplerConfig *cfg = &s->cfg;
    SamplerCandidate *c = s->candidates;
    size_t vocab = (size_t)s->vocab_size;
    *out = c;
    if (s->trace) s->trace->n_stages = 0;
    record_stage(s, "model", logits, NULL, vocab);
    if (s->mask) apply_mask(s, logits);

    /* The bias and the penalties are logits processors: HF applies them
     * before greedy too. */
    apply_bias(s, logits);
    apply_repetition_penalty(s, logits, context, n_context);
    apply_openai_penalties(s, logits, context + n_context - n_generated, n_generated);
    if (cfg->n_bias || cfg->repeat_penalty != 1 || cfg->presence_penalty != 0 || cfg->frequency_penalty != 0)
        record_stage(s, "penalties", logits, NULL, vocab);
    if (cfg->temperature == 0) {
        int best = argmax(logits, s->vocab_size);
        c[0] = (SamplerCandidate){best, logits[best], 1};
        return 1;
    }

    /* Temperature first: every later step sees the scaled logits. */
    float temperature = (float)cfg->temperature;
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= temperature;
    record_stage(s, "temperature", logits, NULL, vocab);

    size_t n = gather_candidates(s, logits);
    if (top_k_on(s)) record_stage(s, "top-k", NULL, c, n);
    /* Top-p and min-p each judge by the softmax of what is left before them. */
    if (cfg->top_p < 1) {
        size_t top = softmax(c, n);
        n = top_p_filter(s, n, top);
        record_stage(s, "top-p", NULL, c, n);
    }
    if (cfg->min_p > 0) {
        size_t top = softmax(c, n);
        n = min_p_filter(c, n, top, cfg->min_p);
        record_stage(s, "min-p", NULL, c, n);
    }
    softmax(c, n);
    return n;
}

int sampler_pick(const SamplerCandidate *candidates, size_t n, double u) {
    /* Scale u by the actual total, which rounding leaves a hair off 1. For u
     * < 1, u * total rounds below the total, and the running total, made of
     * the same additions, ends exactly on it: some candidate is always
     * reached, and never one of probability 0 (it adds nothing). */
    double total = 0;
    for (size_t i = 0; i < n; i++) total += candidates[i].prob;
    double target = u * total, running = 0;
    for (size_t i = 0; i < n; i++) {
        running += candidates[i].prob;
        if (running > target) return candidates[i].id;
    }
    return candidates[n - 1].id;  /* only for u >= 1, outside the contract */
}

int sampler_sample(Sampler *s, float *logits, const int *context, size_t n_context, size_t n_generated) {
    const SamplerCandidate *c;
    size_t n = sampler_candidates(s, logits, context, n_context, n_generated, &c);
    int id = s->cfg.temperature == 0 ? c[0].id : sampler_pick(c, n, rng_uniform(&s->rng));
    if (s->trace) record_choice(s, id);
    return id;
}
