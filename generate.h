/* generate.h - generating text, one token at a time.
 *
 * GenerationConfig is how to generate: the sampler's settings, the length
 * limit and the end tokens, read from the checkpoint's generation_config.json
 * as transformers' `generate` reads them, with the caller's choices on top.
 *
 * A Sequence is one stream of tokens being generated: its own KV cache, the
 * tokens in it, and the step that turns the model's logits into the next
 * token under the stop rules (end tokens, stop strings, the length limit, a
 * full context) and a grammar when it has one (from the reply's start, or
 * lazy: from a trigger on), giving out the new text as whole UTF-8
 * characters. The
 * command line drives one sequence; the server drives several, batching their
 * forward passes (sequence_pending / sequence_fed) itself. */
#ifndef GENERATE_H
#define GENERATE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "grammar.h"
#include "net.h"
#include "sampler.h"
#include "tokenizer.h"
#include "util.h"

typedef struct {
    SamplerConfig sampling;
    int max_new;               /* new tokens per reply at most; -1: until an end token or a full context */
    int eos_ids[MAX_EOS_IDS];  /* ids that end a reply (and are not shown) */
    int n_eos;
    bool ignore_eos;           /* the end tokens are never sampled (llama.cpp's --ignore-eos) */
} GenerationConfig;

/* The checkpoint's defaults, as transformers' generate takes them: from
 * MODEL's generation_config.json when there is one (sampling only when it
 * says do_sample; its eos ids replace config.json's), else greedy with
 * config.json's eos ids. max_new is left at `max_new`. A missing file is no
 * error; a broken one is. */
int generation_config_load(GenerationConfig *g, const char *model, const Config *c, int max_new, Error *e);

typedef enum {
    STOP_NONE,                 /* not stopped: more tokens can follow */
    STOP_EOS,                  /* an end token */
    STOP_STRING,               /* a stop string */
    STOP_LENGTH,               /* max_new tokens */
    STOP_CONTEXT_FULL,         /* the token sampled has no position left in the KV cache */
    STOP_INTERRUPTED,          /* the caller stopped it (set by the caller) */
    STOP_GRAMMAR,              /* the grammar is complete and allows nothing more
                                  (or its parse outgrew a bound: grammar_error) */
} StopReason;

/* "an end token", "a stop string", "the length limit", "a full context",
 * "an interruption", "the grammar's end". */
const char *stop_reason_text(StopReason r);

enum { MAX_STOP_STRINGS = 4, MAX_TOP_LOGPROBS = 20 };

typedef struct {
    int id;
    float logprob;             /* log of the model's probability (softmax of its raw logits) */
} TokenLogprob;

/* What one step did. */
typedef struct {
    int id;                    /* the token chosen (an end token when stop == STOP_EOS) */
    const char *text;          /* the text this step completes, safe to show (valid */
    size_t len;                /*   until the next step); a stop string is never in it */
    StopReason stop;
    TokenLogprob chosen;       /* with logprobs: the chosen token's */
    int n_top;                 /* with logprobs: the most probable tokens, best first */
    TokenLogprob top[MAX_TOP_LOGPROBS];
} Step;

/* Where a lazy grammar starts to hold (sequence_set_grammar_triggers). */
typedef struct {
    const char *text;          /* bytes that wake the grammar once generated */
    bool at_start;             /* only as the reply's first bytes (after whitespace) */
} GrammarTrigger;

enum { MAX_GRAMMAR_TRIGGERS = 4 };

typedef struct {
    Model *model;
    const Tokenizer *tokenizer;
    Sampler *sampler;
    GenerationConfig config;
    KVCache cache;
    TokenIds tokens;           /* the sequence so far: prompts and generated ids */
    int n_cached;              /* tokens[0..n_cached) have their keys and values in the cache */
    int reply_start;           /* tokens[reply_start..) were generated in the current reply */
    int logprobs;              /* -1: none; else log-probabilities with this many top tokens */
    float *raw_logits;         /* [vocab_size] a copy of the step's logits, for logprobs */
    char *stops[MAX_STOP_STRINGS];
    int n_stops;
    Grammar *grammar;          /* constrained decoding (the caller's), or NULL */
    const GrammarVocab *grammar_vocab;
    GrammarState grammar_state;  /* the reply's parse so far */
    uint64_t *grammar_mask;    /* the step's allowed tokens, for the sampler */
    GrammarTrigger triggers[MAX_GRAMMAR_TRIGGERS]; /* a lazy grammar's (texts are the Sequence's) */
    int n_triggers;
    bool grammar_awake;        /* the grammar holds: not lazy, or a trigger has come */
    char *asleep;              /* a lazy grammar's reply so far, its tokens' bytes, while it sleeps */
    size_t n_asleep, asleep_cap;
    size_t trigger_from;       /* asleep[trigger_from..) may still hold a trigger's start */
    DecodeStream stream;
    char *held;                /* decoded text not given out yet: it may begin a stop string */
    size_t n_held, held_cap;
    char *out;                 /* the text a step gives out */
    size_t out_cap;
    /* Statistics: prompt tokens fed, tokens generated, and decoding steps
     * (a generated token fed). */
    int prompt_tokens, generated_tokens, decode_tokens;
    double prompt_seconds, decode_seconds;
} Sequence;

/* A sequence of up to `capacity` tokens (<= m->max_context) generating
 * with g; its sampler is seeded with g->sampling.seed. */
void sequence_init(Sequence *s, Model *m, const Tokenizer *t, const GenerationConfig *g, int capacity);
void sequence_free(Sequence *s);

/* Stop strings for the next replies (at most MAX_STOP_STRINGS, non-empty):
 * the text stops before the first place one of them appears. */
void sequence_set_stops(Sequence *s, const char *const *stops, int n);

/* Constrains the next replies to sentences of g (each reply parsed from
 * g's start; the end tokens of v end a reply only where g is complete);
 * NULL removes it. g and v stay the caller's, and must outlive the use.
 * The triggers are cleared: the grammar holds from the reply's start. */
void sequence_set_grammar(Sequence *s, Grammar *g, const GrammarVocab *v);

/* Makes the grammar lazy (llama.cpp's lazy grammars, for tool calls that
 * may come after free text): each reply is free until the bytes of one of
 * triggers[0..n) (n <= MAX_GRAMMAR_TRIGGERS) have been generated; from
 * that trigger's first byte on, the reply must be a sentence of the grammar
 * (the trigger and what its token holds after it are the sentence's start;
 * when the grammar cannot take them, the reply stays free and a later
 * trigger may wake it). The texts are copied. n = 0: not lazy. */
void sequence_set_grammar_triggers(Sequence *s, const GrammarTrigger *triggers, int n);

/* Starts a reply after prompt[0..n): the whole sequence so far (a chat's
 * whole conversation). The cached tokens that prompt begins with are kept;
 * the rest is pending. Returns how many were kept, or -1 when n is 0 or
 * more than the capacity. */
int sequence_start(Sequence *s, const int *prompt, int n);

/* Tokens waiting to be fed: tokens[n_cached..). */
int sequence_pending(const Sequence *s);

/* Feeds every pending token through the model (in blocks) and returns the
 * last one's logits. */
float *sequence_feed(Sequence *s);

/* Records that the caller fed n pending tokens itself (in a batch). */
void sequence_fed(Sequence *s, int n);

/* One step from the logits of the last token (which it modifies): samples,
 * applies the stop rules, and adds the token to the sequence as pending
 * unless it ends the reply. On a stop, the text held back is given out.
 * A token sampled when every position of the cache is taken is still
 * given out (its logits needed no position), and ends the reply with
 * STOP_CONTEXT_FULL: a prompt of p tokens in a capacity of c gets at most
 * c - p + 1 tokens, and nothing is ever fed past the cache. */
Step sequence_step(Sequence *s, float *logits);

/* When the caller stops a reply itself (STOP_INTERRUPTED): the text held
 * back so far, valid until the next call. */
const char *sequence_flush(Sequence *s, size_t *len);

/* The number of tokens generated in the current reply. */
int sequence_generated(const Sequence *s);

#endif
