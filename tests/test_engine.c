/* test_engine.c - the batching engine: several requests at once on fewer
 * slots each get the numpy reference's greedy continuation
 * (tests/data/generation_golden.json, scripts/make_golden.py); the prompt
 * cache; a request for no token; cancelling and stopping; and every
 * position checked against the context, per slot and in a batch whose
 * slots sit at different positions, for generated prompt lengths around
 * the context and lengths limits -1, 0, 1, 5 and c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "../json.h"
#include "test.h"

static Tokenizer *tokenizer;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

/* What one request saw. */
typedef struct {
    EngineRequest r;
    int ids[512];              /* the tokens of its steps */
    int n_ids;
    int events;
    bool started, ended, in_order; /* STARTED first, TOKENs, ENDED last */
    StopReason stop;
} Got;

static void on_event(void *ctx, EngineRequest *r, const EngineEvent *event) {
    Got *g = ctx;
    (void)r;
    pthread_mutex_lock(&lock);
    if (g->ended) g->in_order = false;
    if (event->kind == ENGINE_STARTED) {
        if (g->events) g->in_order = false;
        g->started = true;
    } else if (event->kind == ENGINE_TOKEN) {
        if (!g->started) g->in_order = false;
        if (g->n_ids < 512) g->ids[g->n_ids++] = event->step->id;
    } else {
        g->ended = true;
        g->stop = event->stop;
    }
    g->events++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void request(Got *g, const int *prompt, int n, const GenerationConfig *config, int max_new) {
    memset(g, 0, sizeof *g);
    g->in_order = true;
    g->r = (EngineRequest){.prompt = prompt, .n_prompt = n, .generation = *config, .logprobs = -1, .on_event = on_event,
                           .ctx = g};
    g->r.generation.max_new = max_new;
}

static void wait_ended(Got *g) {
    pthread_mutex_lock(&lock);
    while (!g->ended) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
}

static void load(Model *m, const char *dir, int context) {
    Error e;
    ModelOptions opt = {.threads = 2, .context = context};
    if (model_load(m, dir, &opt, &e) != 0) die("%s", e.msg);
}

static int *ids_of(const JsonValue *list, int *n) {
    *n = (int)list->len;
    int *ids = xmalloc((list->len + 1) * sizeof *ids);
    for (size_t i = 0; i < list->len; i++) ids[i] = (int)list->items[i].number.integer;
    return ids;
}

/* Eight requests on two slots (six wait): each the reference's greedy
 * continuation; the cache; a request for no token. */
static void test_golden(const JsonValue *golden, const char *dir) {
    Model m;
    load(&m, dir, 128);
    GenerationConfig g;
    Error e;
    int max_new = (int)json_get(golden, "gen_tokens")->number.integer;
    if (generation_config_load(&g, dir, &m.config, max_new, &e) != 0) die("%s", e.msg);
    Engine *engine = engine_start(&m, tokenizer, &(EngineOptions){.slots = 2, .queue = 6, .defaults = g});
    const JsonValue *gens = json_get(golden, "gen");
    int n_gens = (int)gens->len;
    Got got[9];
    int *prompts[8], n_prompt[8];
    EngineRequest *all[9];
    for (int i = 0; i < 8; i++) {
        prompts[i] = ids_of(json_get(&gens->items[i % n_gens], "prompt_ids"), &n_prompt[i]);
        request(&got[i], prompts[i], n_prompt[i], &g, max_new);
        all[i] = &got[i].r;
    }
    request(&got[8], prompts[0], n_prompt[0], &g, max_new);
    all[8] = &got[8].r;
    CHECK(!engine_submit(engine, all, 9), "nine requests for two slots and a queue of six: refused, all of them");
    CHECK(engine_submit(engine, all, 8), "eight requests: taken");
    for (int i = 0; i < 8; i++) {
        wait_ended(&got[i]);
        int n_want, *want = ids_of(json_get(&gens->items[i % n_gens], "reply_ids"), &n_want);
        CHECK(got[i].n_ids == n_want && memcmp(got[i].ids, want, (size_t)n_want * sizeof(int)) == 0 &&
                  got[i].r.generated == n_want,
              "request %d: the reference's continuation (%d ids, want %d)", i, got[i].n_ids, n_want);
        CHECK(got[i].in_order && got[i].stop == STOP_LENGTH, "request %d: started, its tokens, ended by the length limit", i);
        free(want);
    }
    CHECK(engine_idle(engine), "all answered: idle");

    /* A prompt that continues the last request (its prompt, its reply, one
     * more token) finds all that in a slot's cache but the reply's last
     * token, which was never fed. */
    int next[256], n_next = n_prompt[7] + got[7].n_ids + 1;
    memcpy(next, prompts[7], (size_t)n_prompt[7] * sizeof(int));
    memcpy(next + n_prompt[7], got[7].ids, (size_t)got[7].n_ids * sizeof(int));
    next[n_next - 1] = 11;
    request(&got[8], next, n_next, &g, 2);
    EngineRequest *one = &got[8].r;
    engine_submit(engine, &one, 1);
    wait_ended(&got[8]);
    CHECK(got[8].r.cached == n_next - 2, "a continued prompt: %d tokens cached (want %d)", got[8].r.cached, n_next - 2);

    /* max_new 0: the prompt is fed, no token comes, and the cache keeps it. */
    int longer[256];
    memcpy(longer, prompts[1], (size_t)n_prompt[1] * sizeof(int));
    for (int i = 0; i < 20; i++) longer[n_prompt[1] + i] = 100 + i;
    request(&got[8], longer, n_prompt[1] + 20, &g, 0);
    engine_submit(engine, &one, 1);
    wait_ended(&got[8]);
    CHECK(got[8].n_ids == 0 && got[8].r.generated == 0 && got[8].stop == STOP_LENGTH && got[8].in_order,
          "max_new 0: no token, ended by the length limit");
    request(&got[8], longer, n_prompt[1] + 20, &g, 1);
    engine_submit(engine, &one, 1);
    wait_ended(&got[8]);
    CHECK(got[8].r.cached == n_prompt[1] + 19, "... and its prompt is cached (%d tokens)", got[8].r.cached);

    /* Cancelled while running, and while waiting. */
    GenerationConfig endless = g;
    endless.n_eos = 0;
    Got run[3];
    EngineRequest *three[3];
    for (int i = 0; i < 3; i++) request(&run[i], prompts[i], n_prompt[i], &endless, -1), three[i] = &run[i].r;
    engine_submit(engine, three, 3);
    pthread_mutex_lock(&lock);
    while (run[0].n_ids < 2) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    engine_cancel(engine, &run[2].r);
    engine_cancel(engine, &run[0].r);
    wait_ended(&run[0]);
    wait_ended(&run[2]);
    CHECK(run[0].r.cancelled && run[0].stop == STOP_INTERRUPTED && run[0].in_order, "a running request cancelled: interrupted");
    CHECK(run[2].r.cancelled && !run[2].started && run[2].in_order, "a waiting request cancelled: ended without a slot");
    /* Stopping ends the one still running. */
    engine_stop(engine);
    CHECK(run[1].ended && run[1].stop == STOP_INTERRUPTED && !run[1].r.refused, "stopping: the running reply interrupted");
    CHECK(!engine_submit(engine, &one, 1), "stopped: nothing more taken");
    engine_free(engine);
    for (int i = 0; i < 8; i++) free(prompts[i]);
    model_free(&m);
}

/* The context's edge: prompts of c-2, c-1 and c tokens (lengths drawn at
 * random, and all three at once in a batch whose slots sit at different
 * positions) with length limits -1, 0, 1, 5 and c. A reply never feeds a
 * position past the context (AddressSanitizer watches the cache in `make
 * test-sanitize`): exactly as many tokens as the limit or the context
 * allows, the context c - p + 1 (the last token sampled needs no
 * position), stopped by a full context when that is what ends it. */
static void test_context_edges(const char *dir) {
    unsigned seed = 12345;
    for (int trial = 0; trial < 3; trial++) {
        seed = seed * 1103515245u + 12345u;
        int c = 8 + (int)(seed >> 16) % 40;
        Model m;
        load(&m, dir, c);
        GenerationConfig g;
        Error e;
        if (generation_config_load(&g, dir, &m.config, -1, &e) != 0) die("%s", e.msg);
        g.n_eos = 0;  /* only the context and the limit end a reply */
        Engine *engine = engine_start(&m, tokenizer, &(EngineOptions){.slots = 3, .queue = 0, .defaults = g});
        const int limits[] = {-1, 0, 1, 5, c};
        for (int l = 0; l < 5; l++)
            for (int together = 0; together < 2; together++) {
                /* Each request its own tokens from the first on: no slot
                 * reuses another's cache. */
                int prompts[3][64];
                Got got[3];
                EngineRequest *batch[3];
                for (int k = 0; k < 3; k++) {
                    for (int i = 0; i < c; i++) prompts[k][i] = 1 + (i * 7919 + k * 31 + l * 17 + together * 5) % 2000;
                    request(&got[k], prompts[k], c - 2 + k, &g, limits[l]);
                    batch[k] = &got[k].r;
                }
                /* One at a time, or the three together. */
                for (int k = 0; k < 3; k++)
                    if (!together) engine_submit(engine, &batch[k], 1), wait_ended(&got[k]);
                if (together) engine_submit(engine, batch, 3);
                for (int k = 0; k < 3; k++) {
                    wait_ended(&got[k]);
                    int limit = limits[l], p = c - 2 + k, room = c - p + 1;
                    int want = limit >= 0 && limit < room ? limit : room, n = got[k].r.generated;
                    bool ok = n == want && got[k].n_ids == want && got[k].in_order;
                    bool why = got[k].stop == (want == room ? STOP_CONTEXT_FULL : STOP_LENGTH);
                    CHECK(ok && why, "c %d, prompt %d, max_new %d%s: %d tokens, stopped by %s", c, p, limit,
                          together ? " (three slots at once)" : "", n, stop_reason_text(got[k].stop));
                }
            }
        engine_stop(engine);
        engine_free(engine);
        model_free(&m);
    }
}

/* Four requests in one batch at temperature 1, three under grammars of
 * their own (one lazy), one free: each reply is a sentence of its own
 * grammar, rounds after rounds of new seeds. */
static void test_grammars(const char *dir) {
    Model m;
    load(&m, dir, 128);
    GenerationConfig g;
    Error e;
    if (generation_config_load(&g, dir, &m.config, 40, &e) != 0) die("%s", e.msg);
    g.sampling.temperature = 1;
    g.sampling.top_k = 0;
    Engine *engine = engine_start(&m, tokenizer, &(EngineOptions){.slots = 4, .queue = 0, .defaults = g});
    const char *texts[3] = {"root ::= [0-9]{4} \".\"", "root ::= \"{\" [a-z]{3} \"}\"", "root ::= (\"yes\" | \"no\") \"!\""};
    Grammar *grammars[3];
    for (int k = 0; k < 3; k++) grammars[k] = grammar_new(texts[k], strlen(texts[k]), &e);
    GrammarTrigger lazy = {"{", false};
    LogitBias brace = {tokenizer_find(tokenizer, "{", 1), 9};  /* "{" now and then */
    int prompt[4][3] = {{9707, 11, 1879}, {791, 3974, 13876}, {40, 1079, 264}, {9707, 11, 1879}};
    int matched = 0, woke = 0, free_tokens = 0;
    for (int round = 0; round < 6; round++) {
        Got got[4];
        EngineRequest *batch[4];
        for (int k = 0; k < 4; k++) {
            request(&got[k], prompt[k], 3, &g, 40);
            got[k].r.generation.sampling.seed = (uint64_t)(round * 4 + k);
            got[k].r.seed_given = true;
            got[k].r.grammar = k < 3 ? grammars[k] : NULL;
            /* The second grammar is lazy: free text, then "{abc}" once a "{" comes. */
            if (k == 1 && round % 2) {
                got[k].r.triggers = &lazy, got[k].r.n_triggers = 1;
                got[k].r.generation.sampling.bias = &brace, got[k].r.generation.sampling.n_bias = 1;
            }
            batch[k] = &got[k].r;
        }
        CHECK(engine_submit(engine, batch, 4), "round %d: four requests on four slots", round);
        for (int k = 0; k < 4; k++) {
            wait_ended(&got[k]);
            size_t n;
            char *text = tokenizer_decode(tokenizer, got[k].ids, (size_t)got[k].n_ids, &n);
            if (k == 3) {
                free_tokens += got[k].n_ids;
            } else if (got[k].r.n_triggers) {
                /* Lazy: free text, then from a "{" on the grammar's
                 * sentence; a reply that never woke it ends by the length
                 * limit (the grammar's sentence holds a single "{"). */
                const char *open = strrchr(text, '{');
                bool ok = got[k].stop == STOP_LENGTH ||
                          (got[k].stop == STOP_GRAMMAR && open && grammar_matches(grammars[k], open, strlen(open)));
                CHECK(ok, "round %d, lazy request: '%s' (%s)", round, text, stop_reason_text(got[k].stop));
                woke += got[k].stop != STOP_LENGTH;
            } else {
                bool ok = grammar_matches(grammars[k], text, n) && (got[k].stop == STOP_GRAMMAR || got[k].stop == STOP_EOS);
                CHECK(ok, "round %d, request %d: '%s' is a sentence of %s (%s)", round, k, text, texts[k], stop_reason_text(got[k].stop));
                matched += ok;
            }
            free(text);
        }
    }
    CHECK(matched == 15 && woke > 0 && free_tokens > 0, "the grammars held (%d replies of 15; %d lazy ones woke) beside a free reply",
          matched, woke);
    engine_stop(engine);
    engine_free(engine);
    for (int k = 0; k < 3; k++) grammar_free(grammars[k]);
    model_free(&m);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    char dir[600];
    snprintf(dir, sizeof dir, "%.500s/qwen2", test_scratch("work-engine"));
    Error e;
    tokenizer = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    if (!tokenizer) die("%s", e.msg);
    JsonDoc doc;
    test_json(&doc, "generation_golden.json");
    test_checkpoint(dir, json_get(&doc.root, "checkpoint")->string);
    test_golden(&doc.root, dir);
    test_context_edges(dir);
    test_grammars(dir);
    json_free(&doc);
    tokenizer_free(tokenizer);
    return test_summary("test_engine");
}
