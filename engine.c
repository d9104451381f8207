/* engine.c - the slots, the queue, and the loop that batches every slot's
 * work into one forward pass per step. */
#include "engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Tokens of a new prompt fed per step while other slots are decoding, so
 * that their streams keep flowing. */
enum { PREFILL_CHUNK = 64 };

typedef struct {
    Sequence seq;
    EngineRequest *job;        /* the request it runs, or NULL when free */
    bool starting;             /* given a request that has not started yet */
    bool cancel;               /* its request was cancelled (read under the lock) */
    unsigned long long last_used; /* when it last took a request, to pick the least recently used */
} Slot;

struct Engine {
    Model *model;
    const Tokenizer *tokenizer;
    GrammarVocab *vocab;       /* the vocabulary as grammars' masks see it, made for the first grammar */
    EngineOptions opt;
    Slot *slots;               /* [opt.slots] */
    Chunk *chunks;             /* [opt.slots] one step's work, and the slot of each */
    Slot **owners;
    pthread_t thread;
    pthread_mutex_t lock;      /* everything below, and each request's `cancelled` */
    pthread_cond_t work;       /* the engine thread waits on it for requests */
    EngineRequest *queue_head, *queue_tail;
    int queued;                /* requests in the queue */
    int active;                /* slots with a job */
    unsigned long long requests; /* requests taken so far: seeds and slot ages */
    bool draining, stopping;
};

static void emit(EngineRequest *r, EngineEvent event) { r->on_event(r->ctx, r, &event); }

/* ---- ending a reply ---- */

/* Frees the slot, then hands the request back with its last event. */
static void end(Engine *e, Slot *slot, StopReason stop, const char *text, size_t len) {
    EngineRequest *r = slot->job;
    sequence_set_grammar(&slot->seq, NULL, NULL);  /* the grammar is the request's */
    pthread_mutex_lock(&e->lock);
    slot->job = NULL;
    e->active--;
    pthread_mutex_unlock(&e->lock);
    emit(r, (EngineEvent){.kind = ENGINE_ENDED, .stop = stop, .text = text, .len = len});
}

/* Ends a reply the sampler did not end: its held-back text is given out,
 * unless the client cancelled it (nothing more to say). */
static void end_early(Engine *e, Slot *slot, StopReason stop) {
    size_t len = 0;
    const char *rest = slot->cancel ? "" : sequence_flush(&slot->seq, &len);
    end(e, slot, stop, rest, len);
}

/* ---- starting a reply ---- */

/* How many of the slot's cached tokens the prompt begins with. */
static int common_prefix(const Slot *slot, const EngineRequest *r) {
    const Sequence *q = &slot->seq;
    int n = 0;
    while (n < q->n_cached && n < r->n_prompt && q->tokens.ids[n] == r->prompt[n]) n++;
    return n;
}

/* The free slot for a request: of those whose cache it shares at least
 * half of (an empty slot counts), the one it shares the longest start with;
 * else the least recently used, so that a prompt that merely begins alike
 * (the same system prompt) does not evict another conversation's cache. */
static Slot *choose_slot(Engine *e, const EngineRequest *r) {
    Slot *best = NULL, *oldest = NULL;
    int best_prefix = -1;
    for (int i = 0; i < e->opt.slots; i++) {
        Slot *slot = &e->slots[i];
        if (slot->job) continue;
        if (!oldest || slot->last_used < oldest->last_used) oldest = slot;
        int prefix = common_prefix(slot, r);
        if (2 * prefix < slot->seq.n_cached) continue;
        if (prefix > best_prefix || (prefix == best_prefix && slot->last_used < best->last_used))
            best = slot, best_prefix = prefix;
    }
    return best ? best : oldest;
}

/* Gives queued requests the free slots, in their order (the lock held). */
static void admit(Engine *e) {
    while (e->queue_head) {
        EngineRequest *r = e->queue_head;
        Slot *slot = choose_slot(e, r);
        if (!slot) return;
        e->queue_head = r->next;
        if (!e->queue_head) e->queue_tail = NULL;
        e->queued--;
        slot->job = r;
        slot->starting = true;
        slot->last_used = ++e->requests;
        e->active++;
    }
}

/* Puts a slot's new request in its Sequence: its settings, its grammar, its
 * prompt (the cached start kept, except for embeddings, which need every
 * token's hidden state). */
static void start(Engine *e, Slot *slot) {
    Sequence *q = &slot->seq;
    EngineRequest *r = slot->job;
    GenerationConfig g = r->generation;
    if (!r->seed_given) g.sampling.seed = mix64(g.sampling.seed ^ slot->last_used);
    Error err;
    Sampler *sampler = sampler_new(&g.sampling, e->model->config.vocab_size, &err);
    if (!sampler) die("%s", err.msg);  /* the caller checked the settings */
    sampler_free(q->sampler);
    q->sampler = sampler;
    g.sampling.bias = NULL;  /* the sampler has its own copy */
    g.sampling.n_bias = 0;
    q->config = g;
    if (r->grammar && !e->vocab)
        e->vocab = grammar_vocab_new(e->tokenizer, e->model->config.vocab_size, e->opt.defaults.eos_ids, e->opt.defaults.n_eos);
    sequence_set_grammar(q, r->grammar, e->vocab);
    sequence_set_grammar_triggers(q, r->triggers, r->n_triggers);
    q->logprobs = r->logprobs;
    sequence_set_stops(q, r->stops, r->n_stops);
    if (r->hidden) q->n_cached = 0;
    r->cached = sequence_start(q, r->prompt, r->n_prompt);
    if (r->cached < 0) die("a prompt of %d tokens reached the engine", r->n_prompt);  /* engine_submit checked it */
    slot->starting = false;
    emit(r, (EngineEvent){.kind = ENGINE_STARTED});
}

/* ---- one step ---- */

/* One forward pass: the pending token of every decoding slot, and a chunk
 * of each prompt being fed; then a step for each slot whose tokens are all
 * in. */
static void step(Engine *e) {
    int budget = e->model->state.max_tokens, n = 0, decoding = 0, dim = e->model->config.dim;
    for (int i = 0; i < e->opt.slots; i++) {
        Sequence *q = &e->slots[i].seq;
        if (e->slots[i].job && sequence_pending(q) > 0 && q->n_cached >= q->reply_start) decoding++;
    }
    /* Decoding slots first (one token each), then prompts in what is left. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < e->opt.slots && budget > 0; i++) {
            Slot *slot = &e->slots[i];
            Sequence *q = &slot->seq;
            int pending = slot->job ? sequence_pending(q) : 0;
            bool is_decoding = q->n_cached >= q->reply_start;
            if (pending == 0 || is_decoding != (pass == 0)) continue;
            int take = pending < budget ? pending : budget;
            if (decoding && take > PREFILL_CHUNK) take = PREFILL_CHUNK;
            float *hidden = slot->job->hidden ? slot->job->hidden + (size_t)q->n_cached * dim : NULL;
            e->chunks[n] = (Chunk){.cache = &q->cache, .tokens = q->tokens.ids + q->n_cached, .n_tokens = take,
                                   .pos = q->n_cached, .hidden = hidden};
            e->owners[n++] = slot;
            budget -= take;
        }
    if (n == 0) return;
    float *logits = forward_batch(e->model, e->chunks, n);
    int vocab = e->model->config.vocab_size;
    for (int i = 0; i < n; i++) {
        Slot *slot = e->owners[i];
        Sequence *q = &slot->seq;
        EngineRequest *r = slot->job;
        sequence_fed(q, e->chunks[i].n_tokens);
        if (sequence_pending(q) > 0) continue;
        /* The prompt is in: a request for no token ends here. */
        if (r->hidden || (r->generation.max_new == 0 && q->n_cached == q->reply_start)) {
            end(e, slot, STOP_LENGTH, "", 0);
            continue;
        }
        Step s = sequence_step(q, logits + (size_t)i * vocab);
        r->generated++;
        emit(r, (EngineEvent){.kind = ENGINE_TOKEN, .step = &s});
        if (s.stop != STOP_NONE) end(e, slot, s.stop, "", 0);
    }
}

/* ---- the thread ---- */

static void *engine_main(void *arg) {
    Engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->stopping && !e->active && !e->queue_head) pthread_cond_wait(&e->work, &e->lock);
        bool stopping = e->stopping;
        /* Waiting requests that were cancelled leave the queue; when
         * stopping, all of them (refused). */
        EngineRequest *left = NULL, **tail = &left;
        for (EngineRequest **p = &e->queue_head; *p;) {
            EngineRequest *r = *p;
            if (!stopping && !r->cancelled) {
                e->queue_tail = r, p = &r->next;
                continue;
            }
            *p = r->next;
            r->refused = !r->cancelled;
            e->queued--;
            *tail = r, tail = &r->next, r->next = NULL;
        }
        if (!e->queue_head) e->queue_tail = NULL;
        if (!stopping) admit(e);
        for (int i = 0; i < e->opt.slots; i++) e->slots[i].cancel = e->slots[i].job && e->slots[i].job->cancelled;
        pthread_mutex_unlock(&e->lock);
        for (EngineRequest *r = left, *next; r; r = next) {
            next = r->next;
            emit(r, (EngineEvent){.kind = ENGINE_ENDED, .stop = STOP_INTERRUPTED, .text = "", .len = 0});
        }
        /* Replies whose client cancelled them end here; when stopping, all of them. */
        for (int i = 0; i < e->opt.slots; i++) {
            Slot *slot = &e->slots[i];
            if (slot->job && slot->starting) start(e, slot);
            if (slot->job && (slot->cancel || stopping)) end_early(e, slot, STOP_INTERRUPTED);
        }
        if (stopping) break;
        step(e);
    }
    return NULL;
}

Engine *engine_start(Model *m, const Tokenizer *t, const EngineOptions *o) {
    Engine *e = xcalloc(1, sizeof *e);
    *e = (Engine){.model = m, .tokenizer = t, .opt = *o};
    e->slots = xcalloc((size_t)o->slots, sizeof *e->slots);
    e->chunks = xcalloc((size_t)o->slots, sizeof *e->chunks);
    e->owners = xcalloc((size_t)o->slots, sizeof *e->owners);
    for (int i = 0; i < o->slots; i++) sequence_init(&e->slots[i].seq, m, t, &o->defaults, m->max_context);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) die("cannot start the engine thread");
    return e;
}

bool engine_submit(Engine *e, EngineRequest **r, int n) {
    for (int i = 0; i < n; i++)
        if (r[i]->n_prompt < 1 || r[i]->n_prompt > e->model->max_context)
            die("engine_submit: a prompt of %d tokens for a context of %d", r[i]->n_prompt, e->model->max_context);
    bool under_way = true;
    for (int i = 0; i < n; i++) under_way = under_way && r[i]->under_way;
    pthread_mutex_lock(&e->lock);
    bool ok = (!e->draining || under_way) && !e->stopping && e->active + e->queued + n <= e->opt.slots + e->opt.queue;
    for (int i = 0; ok && i < n; i++) {
        r[i]->cached = r[i]->generated = 0;
        r[i]->refused = r[i]->cancelled = false;
        r[i]->next = NULL;
        if (e->queue_tail) e->queue_tail->next = r[i];
        else e->queue_head = r[i];
        e->queue_tail = r[i];
        e->queued++;
    }
    if (ok) pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
    return ok;
}

void engine_cancel(Engine *e, EngineRequest *r) {
    pthread_mutex_lock(&e->lock);
    r->cancelled = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
}

void engine_drain(Engine *e) {
    pthread_mutex_lock(&e->lock);
    e->draining = true;
    pthread_mutex_unlock(&e->lock);
}

bool engine_idle(Engine *e) {
    EngineLoad load = engine_load(e);
    return load.busy_slots == 0 && load.queued == 0;
}

EngineLoad engine_load(Engine *e) {
    pthread_mutex_lock(&e->lock);
    EngineLoad load = {.busy_slots = e->active, .queued = e->queued, .draining = e->draining};
    pthread_mutex_unlock(&e->lock);
    return load;
}

void engine_stop(Engine *e) {
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
}

void engine_free(Engine *e) {
    for (int i = 0; i < e->opt.slots; i++) sequence_free(&e->slots[i].seq);
    grammar_vocab_free(e->vocab);
    free(e->slots);
    free(e->chunks);
    free(e->owners);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->work);
    free(e);
}
