/* test_generate.c - generation settings and Sequence against the reference.
 *
 * tests/data/generation_golden.json (scripts/make_golden.py) holds the
 * numpy reference's greedy continuations and first-step log-probabilities
 * for a Qwen2 checkpoint (prompts tokenized by Hugging Face's tokenizer) and
 * for Qwen3 and Llama ones; the checkpoints are regenerated here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../generate.h"
#include "../json.h"
#include "test.h"

static char work[512];
static Tokenizer *tokenizer;

/* The ids of a JSON array. */
static int *ids_of(const JsonValue *list, int *n) {
    *n = (int)list->len;
    int *ids = xmalloc((list->len + 1) * sizeof *ids);
    for (size_t i = 0; i < list->len; i++) ids[i] = (int)list->items[i].number.integer;
    return ids;
}

static void load(Model *m, const char *dir, int context) {
    Error e;
    ModelOptions opt = {.threads = 2, .context = context};
    if (model_load(m, dir, &opt, &e) != 0) die("%s", e.msg);
}

static GenerationConfig greedy_config(const char *dir, const Model *m, int max_new) {
    GenerationConfig g;
    Error e;
    if (generation_config_load(&g, dir, &m->config, max_new, &e) != 0) die("%s", e.msg);
    return g;
}

/* Runs a whole reply; the ids generated go to out (up to cap), the text to
 * *text. Returns why it stopped. */
static StopReason run_reply(Sequence *s, const int *prompt, int n, int *out, int cap, int *n_out, char **text) {
    size_t len = 0;
    *text = xmalloc(1);
    *n_out = 0;
    sequence_start(s, prompt, n);
    float *logits = sequence_feed(s);
    for (;;) {
        Step step = sequence_step(s, logits);
        *text = xrealloc(*text, len + step.len + 1, 1);
        memcpy(*text + len, step.text, step.len);
        len += step.len;
        (*text)[len] = '\0';
        if (step.stop != STOP_EOS && *n_out < cap) out[(*n_out)++] = step.id;
        if (step.stop != STOP_NONE) return step.stop;
        logits = sequence_feed(s);
    }
}

/* The first step's log-probabilities against the reference's. */
static void check_logprobs(const char *name, Sequence *s, const int *prompt, int n, const JsonValue *want) {
    s->logprobs = (int)want->len;
    sequence_start(s, prompt, n);
    Step step = sequence_step(s, sequence_feed(s));
    double err = 0;
    bool same_ids = step.n_top == (int)want->len;
    for (int i = 0; same_ids && i < step.n_top; i++) {
        same_ids = step.top[i].id == json_get(&want->items[i], "id")->number.integer;
        err = fmax(err, fabs(step.top[i].logprob - json_get(&want->items[i], "logprob")->number.value));
    }
    CHECK(same_ids, "%s: the top %zu tokens of the first step are the reference's", name, want->len);
    CHECK(err < 1e-4, "%s: their log-probabilities within 1e-4 of the reference's (err %.1e)", name, err);
    CHECK(step.chosen.id == step.id && step.chosen.logprob == step.top[0].logprob, "%s: greedy chose the most probable", name);
    s->logprobs = -1;
}

/* Greedy continuations of the other families, and their log-probabilities. */
static void test_families(const JsonValue *golden) {
    const JsonValue *families = json_get(golden, "families");
    int max_new = (int)json_get(golden, "family_tokens")->number.integer;
    for (size_t f = 0; f < families->len; f++) {
        const JsonValue *fam = &families->items[f];
        const char *name = json_get(fam, "name")->string;
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", work, name);
        test_checkpoint(dir, json_get(fam, "checkpoint")->string);
        Model m;
        load(&m, dir, 64);
        GenerationConfig g = greedy_config(dir, &m, max_new);
        Sequence s;
        sequence_init(&s, &m, tokenizer, &g, 64);
        int n, n_want, got[64], n_got, *prompt = ids_of(json_get(fam, "prompt_ids"), &n);
        int *want = ids_of(json_get(fam, "reply_ids"), &n_want);
        char *text;
        StopReason stop = run_reply(&s, prompt, n, got, 64, &n_got, &text);
        CHECK(n_got == n_want && memcmp(got, want, (size_t)n_want * sizeof(int)) == 0,
              "%s: the greedy continuation is the reference's (%d ids, want %d)", name, n_got, n_want);
        CHECK(stop == (n_want < max_new ? STOP_EOS : STOP_LENGTH), "%s: stopped by %s", name, stop_reason_text(stop));
        check_logprobs(name, &s, prompt, n, json_get(fam, "top_logprobs"));
        free(text), free(prompt), free(want);
        sequence_free(&s);
        model_free(&m);
    }
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) die("%s: cannot create", path);
    fputs(text, f);
    fclose(f);
}

/* Qwen2: the gen prompts' continuations, end tokens, stop strings, the
 * length limit, a full context and the reuse of the cache. */
static void test_qwen2(const JsonValue *golden) {
    char dir[1024], args[512], path[1100];
    snprintf(dir, sizeof dir, "%s/qwen2", work);
    test_checkpoint(dir, json_get(golden, "checkpoint")->string);
    Model m;
    load(&m, dir, 128);
    int max_new = (int)json_get(golden, "gen_tokens")->number.integer;
    GenerationConfig g = greedy_config(dir, &m, max_new);
    Sequence s;
    sequence_init(&s, &m, tokenizer, &g, 128);
    const JsonValue *gens = json_get(golden, "gen");
    for (size_t i = 0; i < gens->len; i++) {
        const JsonValue *gen = &gens->items[i];
        int n, n_want, got[64], n_got, *prompt = ids_of(json_get(gen, "prompt_ids"), &n);
        int *want = ids_of(json_get(gen, "reply_ids"), &n_want);
        char *text;
        run_reply(&s, prompt, n, got, 64, &n_got, &text);
        const char *stdout_text = json_get(gen, "stdout")->string;
        CHECK(n_got == n_want && memcmp(got, want, (size_t)n_want * sizeof(int)) == 0, "prompt %zu: the reference's ids", i);
        CHECK(strlen(text) + 1 == strlen(stdout_text) && strncmp(text, stdout_text, strlen(text)) == 0,
              "prompt %zu: the text Hugging Face decodes", i);
        char name[32];
        snprintf(name, sizeof name, "prompt %zu", i);
        check_logprobs(name, &s, prompt, n, json_get(gen, "top_logprobs"));

        /* The reply again with a stop string from its middle: the text ends
         * before it, which is not given out. */
        if (i == 1) {
            size_t len = strlen(text);
            char *stop = xstrdup(text + len / 2), *stopped;
            stop[len / 4 + 1] = '\0';
            const char *stops[] = {"never appears", stop};
            sequence_set_stops(&s, stops, 2);
            StopReason why = run_reply(&s, prompt, n, got, 64, &n_got, &stopped);
            const char *at = strstr(text, stop);
            CHECK(why == STOP_STRING && at && strlen(stopped) == (size_t)(at - text) && strncmp(stopped, text, strlen(stopped)) == 0,
                  "a stop string: the text before it (got '%s', stop '%s')", stopped, stop);
            sequence_set_stops(&s, NULL, 0);
            free(stop), free(stopped);
        }
        free(text), free(prompt), free(want);
    }

    /* The cache: a prompt that continues the sequence so far reuses it. */
    int first = (int)json_get(&gens->items[0], "prompt_ids")->len;
    int n, *prompt = ids_of(json_get(&gens->items[0], "prompt_ids"), &n), got[64], n_got;
    char *text;
    run_reply(&s, prompt, n, got, 64, &n_got, &text);
    int *longer = xmalloc((size_t)(n + n_got + 1) * sizeof *longer);
    memcpy(longer, prompt, (size_t)n * sizeof *longer);
    memcpy(longer + n, got, (size_t)n_got * sizeof *longer);
    longer[n + n_got] = 11;
    CHECK(sequence_start(&s, longer, n + n_got + 1) == first + n_got - 1,
          "a prompt continuing the sequence keeps what the cache holds (%d tokens)", first + n_got - 1);
    CHECK(sequence_pending(&s) == 2, "... and feeds the rest");
    free(text), free(longer);

    /* The length limit and a full context. */
    s.config.max_new = 3;
    StopReason why = run_reply(&s, prompt, n, got, 64, &n_got, &text);
    CHECK(why == STOP_LENGTH && n_got == 3, "max_new 3: three tokens, stopped by the length limit");
    free(text);
    sequence_free(&s);
    g.max_new = -1;
    sequence_init(&s, &m, tokenizer, &g, n + 4);
    why = run_reply(&s, prompt, n, got, 64, &n_got, &text);
    CHECK(why == STOP_CONTEXT_FULL && n_got == 5,
          "a context of prompt + 4: five tokens (the last needs no position), stopped by a full context");
    free(text);
    sequence_free(&s);
    model_free(&m);

    /* An end token the continuation reaches, from config.json and from
     * generation_config.json's list: the reply stops before it. */
    const JsonValue *eos = json_get(golden, "eos");
    int eos_id = (int)json_get(eos, "eos_id")->number.integer, before = (int)json_get(eos, "n_before")->number.integer;
    const char *want_text = json_get(eos, "stdout")->string;
    for (int source = 0; source < 2; source++) {
        snprintf(dir, sizeof dir, "%s/eos%d", work, source);
        snprintf(args, sizeof args, "%s --set eos_token_id=%d", json_get(golden, "checkpoint")->string, source ? 7 : eos_id);
        test_checkpoint(dir, args);
        if (source) {
            char config[128];
            snprintf(path, sizeof path, "%s/generation_config.json", dir);
            snprintf(config, sizeof config, "{\"eos_token_id\": [151643, %d], \"max_new_tokens\": 16}", eos_id);
            write_file(path, config);
        }
        load(&m, dir, 128);
        g = greedy_config(dir, &m, 16);
        sequence_init(&s, &m, tokenizer, &g, 128);
        int n_prompt, *eos_prompt = ids_of(json_get(eos, "prompt_ids"), &n_prompt);
        why = run_reply(&s, eos_prompt, n_prompt, got, 64, &n_got, &text);
        const char *from = source ? "generation_config.json" : "config.json";
        CHECK(why == STOP_EOS && n_got == before, "an eos id from %s ends the reply after %d tokens (got %d)", from, before, n_got);
        CHECK(strlen(text) + 1 == strlen(want_text) && strncmp(text, want_text, strlen(text)) == 0,
              "an eos id from %s: the text before it, nothing for it", from);
        free(text), free(eos_prompt);
        sequence_free(&s);
        model_free(&m);
    }
    free(prompt);
}

/* generation_config.json: sampling only with do_sample, its values checked. */
static void test_generation_config(void) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/config", work);
    test_checkpoint(dir, "--set vocab_size=2048 --set eos_token_id=5");
    Config c;
    Error e;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (config_load(&c, path, &e) != 0) die("%s", e.msg);
    GenerationConfig g;
    CHECK(generation_config_load(&g, dir, &c, 9, &e) == 0 && g.sampling.temperature == 0 && g.max_new == 9 &&
              g.n_eos == 1 && g.eos_ids[0] == 5,
          "no generation_config.json: greedy, config.json's eos ids");
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    write_file(path, "{\"do_sample\": true, \"temperature\": 0.7, \"top_p\": 0.8, \"top_k\": 20, \"repetition_penalty\": 1.05, "
                     "\"eos_token_id\": [151645, 151643]}");
    CHECK(generation_config_load(&g, dir, &c, 9, &e) == 0 && g.sampling.temperature == 0.7 && g.sampling.top_p == 0.8 &&
              g.sampling.top_k == 20 && g.sampling.repeat_penalty == 1.05 && g.n_eos == 2 && g.eos_ids[1] == 151643,
          "Qwen2.5-Instruct's generation_config.json");
    write_file(path, "{\"temperature\": 0.7, \"max_new_tokens\": 40}");
    CHECK(generation_config_load(&g, dir, &c, 9, &e) == 0 && g.sampling.temperature == 0 && g.max_new == 40,
          "without do_sample, greedy; max_new_tokens read");
    write_file(path, "{\"do_sample\": true, \"top_p\": 1.5}");
    CHECK(generation_config_load(&g, dir, &c, 9, &e) == -1 && strstr(e.msg, "top-p must be in (0, 1]") &&
              strstr(e.msg, "generation_config.json"),
          "a bad top_p refused, naming the file (%s)", e.msg);
    write_file(path, "{\"temperature\": \"hot\"}");
    CHECK(generation_config_load(&g, dir, &c, 9, &e) == -1 && strstr(e.msg, "\"temperature\" must be a number"),
          "a temperature that is not a number refused (%s)", e.msg);
}

/* A lazy grammar on the qwen2 checkpoint at temperature 1, its trigger
 * forced by a logit bias of +100 on one token: the reply is free until the
 * trigger, then follows the grammar; a trigger the grammar cannot take, or
 * one not at the start when it must be, leaves the reply free. */
static StopReason lazy_reply(Model *m, const char *dir, const char *gbnf, const char *token, bool at_start, char **text) {
    GenerationConfig g = greedy_config(dir, m, 12);
    int id = tokenizer_find(tokenizer, token, strlen(token));
    CHECK(id >= 0, "the token '%s' exists", token);
    LogitBias bias = {id, 100};
    g.sampling.temperature = 1;
    g.sampling.top_k = 0;
    g.sampling.bias = &bias;
    g.sampling.n_bias = 1;
    Error e;
    Grammar *grammar = grammar_new(gbnf, strlen(gbnf), &e);
    GrammarVocab *v = grammar_vocab_new(tokenizer, m->config.vocab_size, g.eos_ids, g.n_eos);
    Sequence s;
    sequence_init(&s, m, tokenizer, &g, 128);
    sequence_set_grammar(&s, grammar, v);
    GrammarTrigger trigger = {"{", at_start};
    sequence_set_grammar_triggers(&s, &trigger, 1);
    const int prompt[] = {9707, 11, 1879};
    int out[16], n_out;
    StopReason stop = run_reply(&s, prompt, 3, out, 16, &n_out, text);
    sequence_free(&s);
    grammar_vocab_free(v);
    grammar_free(grammar);
    return stop;
}

static void test_lazy_grammar(const JsonValue *golden) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/qwen2", work);
    test_checkpoint(dir, json_get(golden, "checkpoint")->string);
    Model m;
    load(&m, dir, 128);
    const char *digit = "root ::= \"{\" [0-9] \"}\"";
    char *text;
    StopReason stop = lazy_reply(&m, dir, digit, "{", true, &text);
    CHECK(stop == STOP_GRAMMAR && strlen(text) == 3 && text[0] == '{' && text[1] >= '0' && text[1] <= '9' && text[2] == '}',
          "'{' forced first, at_start: the grammar wakes and holds ('%s', %s)", text, stop_reason_text(stop));
    free(text);
    stop = lazy_reply(&m, dir, digit, "={", false, &text);
    CHECK(stop == STOP_GRAMMAR && strlen(text) == 4 && strncmp(text, "={", 2) == 0 && text[3] == '}',
          "'={' forced, anywhere: free '=', then the grammar from '{' ('%s', %s)", text, stop_reason_text(stop));
    free(text);
    stop = lazy_reply(&m, dir, digit, "={", true, &text);
    CHECK(stop == STOP_LENGTH && strcmp(text, "={={={={={={={={={={={={") == 0,
          "'={' forced, at_start only: never at the start, the reply stays free ('%s', %s)", text, stop_reason_text(stop));
    free(text);
    stop = lazy_reply(&m, dir, digit, "{}", false, &text);
    CHECK(stop == STOP_LENGTH && strcmp(text, "{}{}{}{}{}{}{}{}{}{}{}{}") == 0,
          "'{}' forced: the grammar cannot take '{}', so it sleeps on ('%s', %s)", text, stop_reason_text(stop));
    free(text);
    model_free(&m);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    snprintf(work, sizeof work, "%.400s", test_scratch("work-generate"));
    Error e;
    tokenizer = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    if (!tokenizer) die("%s", e.msg);
    JsonDoc doc;
    test_json(&doc, "generation_golden.json");
    test_families(&doc.root);
    test_qwen2(&doc.root);
    test_lazy_grammar(&doc.root);
    test_generation_config();
    json_free(&doc);
    tokenizer_free(tokenizer);
    return test_summary("test_generate");
}
