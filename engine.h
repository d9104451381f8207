/* engine.h - the batching engine behind `run serve`: slots, continuous
 * batching and the prompt cache. Requests of token ids come in; tokens and
 * events go out. It knows nothing of HTTP or JSON (server.c and api.c do).
 *
 * The engine runs the model on its own thread for every request at once:
 * `slots` Sequences, each with its own KV cache of the model's context.
 * Each engine step is one forward pass over the pending token of every
 * decoding slot and a chunk of each new prompt, so a request that arrives
 * joins the next step (continuous batching). A slot keeps its tokens and
 * cache after a request, and a new request goes to the free slot whose
 * tokens its prompt shares the longest start with, so that a conversation's
 * next turn computes only its new tokens. Requests that find no free slot
 * wait in a bounded queue. No position past a slot's context is ever fed:
 * a reply that reaches it ends with STOP_CONTEXT_FULL. A request may bring
 * a grammar (constrained decoding): its slot's steps sample under that
 * grammar's mask, each slot of a batch under its own. */
#ifndef ENGINE_H
#define ENGINE_H

#include <stdbool.h>

#include "generate.h"
#include "net.h"
#include "tokenizer.h"

typedef enum {
    ENGINE_STARTED,            /* the request has a slot: request->cached is known */
    ENGINE_TOKEN,              /* one step: its token, text, log-probabilities and stop */
    ENGINE_ENDED,              /* the last event: the request is the caller's again */
} EngineEventKind;

typedef struct {
    EngineEventKind kind;
    const Step *step;          /* ENGINE_TOKEN: valid during the call */
    StopReason stop;           /* ENGINE_ENDED: why the reply ended */
    const char *text;          /* ENGINE_ENDED: text held back for a stop string */
    size_t len;                /*   that an early end gives out after all */
} EngineEvent;

typedef struct EngineRequest EngineRequest;

/* One request. The caller fills the fields down to `ctx` and keeps the
 * request (and what it points to) alive until its ENGINE_ENDED event; the
 * engine fills the rest. */
struct EngineRequest {
    const int *prompt;         /* [n_prompt] token ids, 1 <= n_prompt <= the context */
    int n_prompt;
    GenerationConfig generation; /* max_new 0: feed the prompt only (its cache kept), no token */
    bool seed_given;           /* else the engine mixes a fresh seed into generation's */
    const char *const *stops;  /* [n_stops] stop strings */
    int n_stops;
    int logprobs;              /* -1: none; else this many top tokens with each step */
    float *hidden;             /* when not NULL: [n_prompt][dim] receives every prompt token's
                                  final-normed hidden state (embeddings); no token is generated */
    Grammar *grammar;          /* when not NULL: the reply is a sentence of it (this request's own:
                                  the engine thread parses with it until ENGINE_ENDED) */
    const GrammarTrigger *triggers; /* [n_triggers] when n_triggers > 0 the grammar is lazy */
    int n_triggers;            /*   (sequence_set_grammar_triggers) */
    bool under_way;            /* a later part of work taken before a drain (the next inputs of
                                  an embeddings request): taken while draining */
    /* Called on the engine thread, with no lock held, for each event in
     * order: ENGINE_STARTED (unless the request ends before it gets a
     * slot), ENGINE_TOKEN for each step, ENGINE_ENDED once. */
    void (*on_event)(void *ctx, EngineRequest *r, const EngineEvent *event);
    void *ctx;
    /* Filled by the engine. */
    int cached;                /* prompt tokens found in the slot's cache */
    int generated;             /* tokens sampled (an end token too) */
    bool refused;              /* ended before it had a slot: the engine stopped */
    bool cancelled;            /* ended by engine_cancel */
    EngineRequest *next;       /* in the queue */
};

typedef struct {
    int slots;                 /* requests generated at once */
    int queue;                 /* requests waiting for a slot at most */
    GenerationConfig defaults; /* a slot's settings before its first request */
} EngineOptions;

typedef struct Engine Engine;

/* Starts the engine thread for model m (its scratch space is the engine's
 * from now on) and tokenizer t (decoding only). */
Engine *engine_start(Model *m, const Tokenizer *t, const EngineOptions *o);

/* Queues requests r[0..n) (all or none); false when the queue has no room
 * for them, the engine is stopped, or it is draining and they are not all
 * under_way. */
bool engine_submit(Engine *e, EngineRequest **r, int n);

/* Ends a request early, queued or running (its ENGINE_ENDED comes soon,
 * with STOP_INTERRUPTED and nothing held back given out). */
void engine_cancel(Engine *e, EngineRequest *r);

/* No new request is taken; those taken run on. */
void engine_drain(Engine *e);

/* Whether no request is running or waiting. */
bool engine_idle(Engine *e);

typedef struct {
    int busy_slots;            /* slots running a request */
    int queued;                /* requests waiting for a slot */
    bool draining;
} EngineLoad;

EngineLoad engine_load(Engine *e);

/* Ends every running reply (STOP_INTERRUPTED, the held-back text given
 * out), refuses those waiting and stops the thread; from then on
 * engine_submit refuses all. */
void engine_stop(Engine *e);

/* Frees a stopped engine. */
void engine_free(Engine *e);

#endif
