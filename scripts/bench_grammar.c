/* bench_grammar.c - the time a token mask takes, over a real vocabulary.
 *
 *   bench_grammar TOKENIZER_JSON SCHEMA_CASES_JSON
 *
 * For every schema of the cases file (tests/data/schema_cases.json) and each
 * of its valid texts, replays decoding that text: per token the mask for the
 * current state, then the step past the token. Two ways: "cold", a fresh
 * grammar for every text (a request that compiles its own: every state's
 * first mask is a walk of the trie), and "warm", one grammar per schema
 * kept across its texts (a server that keeps compiled grammars by schema:
 * states seen before have their masks cached). Prints the median, p99 and
 * worst mask time of each over all the steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../grammar.h"
#include "../json.h"
#include "../schema.h"
#include "../tokenizer.h"

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench_grammar TOKENIZER_JSON SCHEMA_CASES_JSON\n");
        return 2;
    }
    Error e;
    Tokenizer *t = tokenizer_load(argv[1], &e);
    if (!t) return fprintf(stderr, "%s\n", e.msg), 1;
    JsonDoc doc;
    if (json_parse_file(&doc, argv[2], &e) != 0) return fprintf(stderr, "%s\n", e.msg), 1;
    int end = tokenizer_find(t, "<|im_end|>", 10);
    double t0 = now_seconds();
    GrammarVocab *v = grammar_vocab_new(t, tokenizer_vocab_size(t), &end, end >= 0);
    double vocab_ms = (now_seconds() - t0) * 1e3;
    uint64_t *mask = malloc(grammar_mask_words(v) * sizeof *mask);
    for (int warm = 0; warm < 2; warm++) {
    size_t n = 0, cap = 1 << 16;
    double *times = malloc(cap * sizeof *times);
    int texts = 0;
    for (size_t i = 0; i < doc.root.len; i++) {
        const JsonValue *schema = json_get(&doc.root.items[i], "schema"), *cases = json_get(&doc.root.items[i], "cases");
        char *gbnf = schema_to_gbnf(schema->string, schema->len, &e);
        if (!gbnf) return fprintf(stderr, "%s\n", e.msg), 1;
        Grammar *kept = warm ? grammar_new(gbnf, strlen(gbnf), &e) : NULL;
        for (size_t k = 0; k < cases->len; k++) {
            const JsonValue *c = &cases->items[k], *text = json_get(c, "text");
            if (!json_get(c, "valid")->boolean || !json_get(c, "canonical")->boolean) continue;
            Grammar *g = warm ? kept : grammar_new(gbnf, strlen(gbnf), &e);
            TokenIds ids = {0};
            tokenizer_encode(t, text->string, text->len, ENCODE_PLAIN, &ids);
            token_ids_push(&ids, end);
            GrammarState s = grammar_start(g);
            for (size_t j = 0; j < ids.n && s >= 0; j++) {
                double a = now_seconds();
                grammar_fill_mask(g, v, s, mask);
                double b = now_seconds();
                if (!(mask[ids.ids[j] >> 6] >> (ids.ids[j] & 63) & 1)) {
                    fprintf(stderr, "the mask leaves out token %d of a valid text: %s\n", ids.ids[j], text->string);
                    return 1;
                }
                s = grammar_accept_token(g, v, s, ids.ids[j]);
                if (n == cap) times = realloc(times, (cap *= 2) * sizeof *times);
                times[n++] = (b - a) * 1e6;
            }
            texts++;
            token_ids_free(&ids);
            if (!warm) grammar_free(g);
        }
        grammar_free(kept);
        free(gbnf);
    }
    qsort(times, n, sizeof *times, compare_double);
    if (!warm) printf("vocabulary %d tokens, trie built in %.1f ms; %d texts, %zu masks\n", tokenizer_vocab_size(t), vocab_ms, texts, n);
    printf("mask time, %s: median %.1f us, p99 %.1f us, worst %.1f us\n", warm ? "warm" : "cold", times[n / 2],
           times[n * 99 / 100], times[n - 1]);
    free(times);
    }
    free(mask);
    grammar_vocab_free(v);
    json_free(&doc);
    tokenizer_free(t);
    return 0;
}
