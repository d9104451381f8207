/* generate.c - generation settings and the step-by-step generation of a sequence. */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- settings: generation_config.json ---- */

/* A number from generation_config.json, or `fallback` when it is absent. */
static int generation_number(const char *path, const JsonValue *root, const char *key, double fallback, double *out,
                             Error *e) {
    const JsonValue *v = json_get(root, key);
    *out = fallback;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) return fail(e, "%s: \"%s\" must be a number, not %s", path, key, json_type_name(v->type));
    *out = v->number.value;
    return 0;
}

static int read_generation_config(GenerationConfig *g, const char *path, const JsonValue *root, Error *e) {
    if (root->type != JSON_OBJECT) return fail(e, "%s: not a JSON object", path);
    SamplerConfig *s = &g->sampling;
    const JsonValue *sample = json_get(root, "do_sample");
    double temperature, top_k, top_p, min_p, penalty, max_new;
    if (generation_number(path, root, "temperature", 1.0, &temperature, e) ||
        generation_number(path, root, "top_k", 50, &top_k, e) || generation_number(path, root, "top_p", 1.0, &top_p, e) ||
        generation_number(path, root, "min_p", 0.0, &min_p, e) ||
        generation_number(path, root, "repetition_penalty", 1.0, &penalty, e) ||
        generation_number(path, root, "max_new_tokens", -1, &max_new, e) ||
        read_eos_ids(path, root, g->eos_ids, &g->n_eos, e))
        return -1;
    /* Without do_sample, transformers decodes greedily whatever the temperature. */
    if (sample && sample->type == JSON_BOOL && sample->boolean) s->temperature = temperature;
    s->top_k = (int)fmin(fmax(top_k, 0), 1 << 30);
    s->top_p = top_p;
    s->min_p = min_p;
    s->repeat_penalty = penalty;
    if (max_new >= 1 && max_new <= 1 << 30) g->max_new = (int)max_new;
    /* A bad value here is the file's fault, not the command line's. */
    Error bad;
    if (sampler_check_config(s, &bad) != 0) return fail(e, "%s: %s", path, bad.msg);
    return 0;
}

int generation_config_load(GenerationConfig *g, const char *model, const Config *c, int max_new, Error *e) {
    *g = (GenerationConfig){
        .sampling = {.temperature = 0, .top_k = 50, .top_p = 1, .min_p = 0, .repeat_penalty = 1},
        .max_new = max_new,
        .n_eos = c->n_eos,
    };
    memcpy(g->eos_ids, c->eos_ids, sizeof g->eos_ids);
    char *path = model_path(model, "generation_config.json");
    int rc = 0;
    if (access(path, F_OK) == 0) {
        JsonDoc doc;
        rc = json_parse_file(&doc, path, e);
        if (rc == 0) {
            rc = read_generation_config(g, path, &doc.root, e);
            json_free(&doc);
        }
    }
    free(path);
    return rc;
}

const char *stop_reason_text(StopReason r) {
    static const char *texts[] = {
        [STOP_NONE] = "not stopped",          [STOP_EOS] = "an end token",
        [STOP_STRING] = "a stop string",      [STOP_LENGTH] = "the length limit",
        [STOP_CONTEXT_FULL] = "a full context", [STOP_INTERRUPTED] = "an interruption",
        [STOP_GRAMMAR] = "the grammar's end",
    };
    return texts[r];
}

/* ---- a sequence ---- */

void sequence_init(Sequence *s, Model *m, const Tokenizer *t, const GenerationConfig *g, int capacity) {
    *s = (Sequence){.model = m, .tokenizer = t, .config = *g, .logprobs = -1};
    Error e;
    s->sampler = sampler_new(&g->sampling, m->config.vocab_size, &e);
    if (!s->sampler) die("%s", e.msg);  /* the caller checked the settings */
    kv_cache_init(&s->cache, m, capacity);
    decode_stream_init(&s->stream, t);
}

void sequence_free(Sequence *s) {
    sampler_free(s->sampler);
    kv_cache_free(&s->cache);
    token_ids_free(&s->tokens);
    free(s->raw_logits);
    free(s->grammar_mask);
    for (int i = 0; i < s->n_triggers; i++) free((char *)s->triggers[i].text);
    free(s->asleep);
    for (int i = 0; i < s->n_stops; i++) free(s->stops[i]);
    decode_stream_free(&s->stream);
    free(s->held);
    free(s->out);
    memset(s, 0, sizeof *s);
}

void sequence_set_stops(Sequence *s, const char *const *stops, int n) {
    for (int i = 0; i < s->n_stops; i++) free(s->stops[i]);
    s->n_stops = n < MAX_STOP_STRINGS ? n : MAX_STOP_STRINGS;
    for (int i = 0; i < s->n_stops; i++) s->stops[i] = xstrdup(stops[i]);
}

void sequence_set_grammar(Sequence *s, Grammar *g, const GrammarVocab *v) {
    free(s->grammar_mask);
    s->grammar = g;
    s->grammar_vocab = v;
    s->grammar_mask = g ? xcalloc(grammar_mask_words(v), sizeof *s->grammar_mask) : NULL;
    s->grammar_state = g ? grammar_start(g) : -1;
    sequence_set_grammar_triggers(s, NULL, 0);
}

/* Wakes the grammar (its mask goes to the sampler) or puts it to sleep. */
static void set_awake(Sequence *s, bool awake) {
    s->grammar_awake = awake;
    sampler_set_mask(s->sampler, awake ? s->grammar_mask : NULL);
}

void sequence_set_grammar_triggers(Sequence *s, const GrammarTrigger *triggers, int n) {
    for (int i = 0; i < s->n_triggers; i++) free((char *)s->triggers[i].text);
    s->n_triggers = n < MAX_GRAMMAR_TRIGGERS ? n : MAX_GRAMMAR_TRIGGERS;
    for (int i = 0; i < s->n_triggers; i++)
        s->triggers[i] = (GrammarTrigger){.text = xstrdup(triggers[i].text), .at_start = triggers[i].at_start};
    set_awake(s, s->grammar && s->n_triggers == 0);
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* A sleeping grammar watches the reply's bytes for a trigger: the earliest
 * one whose text (and the rest of the token) the grammar takes wakes it,
 * in the state after them. */
static void watch_triggers(Sequence *s, int id) {
    size_t len = 0;
    const char *bytes = tokenizer_token(s->tokenizer, id, &len);
    if (!bytes || len == 0) return;
    if (s->n_asleep + len > s->asleep_cap) {
        s->asleep_cap = 2 * (s->n_asleep + len);
        s->asleep = xrealloc(s->asleep, s->asleep_cap, 1);
    }
    memcpy(s->asleep + s->n_asleep, bytes, len);
    s->n_asleep += len;
    size_t lead = 0;  /* where an at_start trigger must begin */
    while (lead < s->n_asleep && is_blank(s->asleep[lead])) lead++;
    for (;;) {
        size_t best = SIZE_MAX;
        for (int i = 0; i < s->n_triggers; i++) {
            size_t n = strlen(s->triggers[i].text);
            for (size_t at = s->trigger_from; at + n <= s->n_asleep && at < best; at++) {
                if (s->triggers[i].at_start && at != lead) continue;
                if (memcmp(s->asleep + at, s->triggers[i].text, n) == 0) best = at;
            }
        }
        if (best == SIZE_MAX) return;
        GrammarState state = grammar_advance(s->grammar, grammar_start(s->grammar), s->asleep + best, s->n_asleep - best);
        s->trigger_from = best + 1;
        if (state >= 0) {
            s->grammar_state = state;
            set_awake(s, true);
            return;
        }
    }
}

int sequence_start(Sequence *s, const int *prompt, int n) {
    if (n <= 0 || n > s->cache.capacity) return -1;
    /* The cache stays valid for the tokens the new prompt begins with. */
    int keep = 0;
    while (keep < s->n_cached && keep < n && s->tokens.ids[keep] == prompt[keep]) keep++;
    /* The last prompt token must be fed again: its logits start the reply. */
    if (keep == n) keep--;
    keep = kv_cache_reusable(s->model, &s->cache, s->n_cached, keep);
    s->n_cached = keep;
    s->tokens.n = 0;
    for (int i = 0; i < n; i++) token_ids_push(&s->tokens, prompt[i]);
    s->reply_start = n;
    s->n_held = 0;
    if (s->grammar) s->grammar_state = grammar_start(s->grammar);
    set_awake(s, s->grammar && s->n_triggers == 0);
    s->n_asleep = s->trigger_from = 0;
    decode_stream_free(&s->stream);
    decode_stream_init(&s->stream, s->tokenizer);
    return keep;
}

int sequence_pending(const Sequence *s) { return (int)s->tokens.n - s->n_cached; }

int sequence_generated(const Sequence *s) { return (int)s->tokens.n - s->reply_start; }

void sequence_fed(Sequence *s, int n) { s->n_cached += n; }

float *sequence_feed(Sequence *s) {
    int n = sequence_pending(s);
    bool decoding = s->n_cached >= s->reply_start;
    double t0 = now_seconds();
    float *logits = forward_prompt(s->model, &s->cache, s->tokens.ids + s->n_cached, n, s->n_cached);
    double seconds = now_seconds() - t0;
    if (decoding) s->decode_tokens += n, s->decode_seconds += seconds;
    else s->prompt_tokens += n, s->prompt_seconds += seconds;
    sequence_fed(s, n);
    return logits;
}

/* The sampler needs logits with no NaN and at least one finite: weights
 * holding NaN or infinities (a broken file) give neither. */
static void check_logits(const float *logits, int n) {
    bool finite = false;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i])) die("the model computed a NaN logit: its weights hold NaN or infinite values");
        finite = finite || isfinite(logits[i]);
    }
    if (!finite) die("the model computed no finite logit: its weights hold infinite values");
}

static bool is_eos(const GenerationConfig *g, int id) {
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos_ids[i] == id) return true;
    return false;
}

/* --ignore-eos: no end token can be sampled (an id past the vocabulary
 * never is). */
static void suppress_eos(const GenerationConfig *g, float *logits, int vocab) {
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos_ids[i] < vocab) logits[g->eos_ids[i]] = -INFINITY;
}

/* Log-probabilities from the raw logits: the chosen token's and the top ones. */
static void fill_logprobs(const Sequence *s, Step *step) {
    const float *x = s->raw_logits;
    int vocab = s->model->config.vocab_size;
    float max = -INFINITY;
    for (int i = 0; i < vocab; i++) max = fmaxf(max, x[i]);
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)x[i] - max);
    double log_sum = max + log(sum);
    step->chosen = (TokenLogprob){.id = step->id, .logprob = (float)(x[step->id] - log_sum)};
    int ids[MAX_TOP_LOGPROBS];
    step->n_top = top_indices(ids, s->logprobs < MAX_TOP_LOGPROBS ? s->logprobs : MAX_TOP_LOGPROBS, x, vocab);
    for (int i = 0; i < step->n_top; i++) step->top[i] = (TokenLogprob){.id = ids[i], .logprob = (float)(x[ids[i]] - log_sum)};
}

/* Appends bytes to the held-back text. */
static void hold(Sequence *s, const char *text, size_t len) {
    if (len == 0) return;  /* held may still be NULL */
    if (s->n_held + len > s->held_cap) {
        s->held_cap = (s->n_held + len) * 2;
        s->held = xrealloc(s->held, s->held_cap, 1);
    }
    memcpy(s->held + s->n_held, text, len);
    s->n_held += len;
}

/* Gives out the first n bytes of the held text (into s->out) and keeps the rest. */
static void give_out(Sequence *s, size_t n, Step *step) {
    if (n + 1 > s->out_cap) {
        s->out_cap = (n + 1) * 2;
        s->out = xrealloc(s->out, s->out_cap, 1);
    }
    if (s->n_held) {  /* else held may be NULL */
        memcpy(s->out, s->held, n);
        memmove(s->held, s->held + n, s->n_held - n);
    }
    s->out[n] = '\0';
    s->n_held -= n;
    step->text = s->out;
    step->len = n;
}

/* How much of the held text is safe to give out: all of it but a tail that
 * could be the start of a stop string. Sets *found when a stop string is in
 * it, and then returns where it begins. */
static size_t safe_length(const Sequence *s, bool *found) {
    *found = false;
    size_t safe = s->n_held;
    for (int i = 0; i < s->n_stops; i++) {
        size_t len = strlen(s->stops[i]);
        for (size_t at = 0; at + len <= s->n_held; at++)
            if (memcmp(s->held + at, s->stops[i], len) == 0) {
                if (!*found || at < safe) safe = at;
                *found = true;
                break;
            }
    }
    if (*found) return safe;
    /* The longest tail that a stop string begins with stays held. */
    for (int i = 0; i < s->n_stops; i++) {
        size_t len = strlen(s->stops[i]);
        for (size_t tail = len - 1; tail > 0; tail--)
            if (tail <= s->n_held && memcmp(s->held + s->n_held - tail, s->stops[i], tail) == 0) {
                if (s->n_held - tail < safe) safe = s->n_held - tail;
                break;
            }
    }
    return safe;
}

const char *sequence_flush(Sequence *s, size_t *len) {
    size_t rest_len;
    const char *rest = decode_stream_flush(&s->stream, &rest_len);
    hold(s, rest, rest_len);
    Step step;
    give_out(s, s->n_held, &step);
    *len = step.len;
    return step.text;
}

Step sequence_step(Sequence *s, float *logits) {
    int vocab = s->model->config.vocab_size;
    Step step = {.text = "", .len = 0, .stop = STOP_NONE, .n_top = 0};
    check_logits(logits, vocab);
    if (s->logprobs >= 0) {
        if (!s->raw_logits) s->raw_logits = xmalloc((size_t)vocab * sizeof(float));
        memcpy(s->raw_logits, logits, (size_t)vocab * sizeof(float));
    }
    if (s->config.ignore_eos) suppress_eos(&s->config, logits, vocab);
    int n_generated = sequence_generated(s);
    /* Under a grammar, the tokens it allows; none left (its parse outgrew a
     * bound) ends the reply. */
    bool constrained = s->grammar && s->grammar_awake;
    bool grammar_stuck = constrained && grammar_fill_mask(s->grammar, s->grammar_vocab, s->grammar_state, s->grammar_mask) == 0;
    if (!grammar_stuck) {
        step.id = sampler_sample(s->sampler, logits, s->tokens.ids, s->tokens.n, (size_t)n_generated);
        if (s->logprobs >= 0) fill_logprobs(s, &step);
        if (constrained) s->grammar_state = grammar_accept_token(s->grammar, s->grammar_vocab, s->grammar_state, step.id);
    }

    /* An end token ends the reply unseen; any other joins the sequence. */
    if (grammar_stuck) {
        step.id = -1;
        step.stop = STOP_GRAMMAR;
    } else if (is_eos(&s->config, step.id)) {
        step.stop = STOP_EOS;
    } else {
        token_ids_push(&s->tokens, step.id);
        s->generated_tokens++;
        size_t len;
        const char *text = decode_stream_push(&s->stream, step.id, &len);
        hold(s, text, len);
        if (s->grammar && !s->grammar_awake) watch_triggers(s, step.id);
        if (s->grammar && s->grammar_awake && grammar_finished(s->grammar, s->grammar_state)) step.stop = STOP_GRAMMAR;
        else if ((int)s->tokens.n > s->cache.capacity) step.stop = STOP_CONTEXT_FULL;
        else if (s->config.max_new >= 0 && n_generated + 1 >= s->config.max_new) step.stop = STOP_LENGTH;
    }

    /* At the end of the reply, the decoder's last bytes join the text. Give
     * out what is safe; a stop string ends the reply before it. */
    bool ending = step.stop != STOP_NONE, found;
    if (ending) {
        size_t len;
        const char *rest = decode_stream_flush(&s->stream, &len);
        hold(s, rest, len);
    }
    size_t safe = safe_length(s, &found);
    if (found) {
        step.stop = STOP_STRING;
        give_out(s, safe, &step);
        s->n_held = 0;
    } else {
        give_out(s, ending ? s->n_held : safe, &step);
    }
    return step;
}
