/* test_grammar.c - the GBNF engine: texts each grammar must accept and
 * refuse (llama.cpp's example grammars as the corpus, read by hand, and cases
 * written for each construct), the one-line errors for bad grammars, and the
 * token masks against a token-by-token check over the Qwen2.5 vocabulary
 * (at prefixes of the json grammar, and at every state along valid texts of
 * each schema of the cases file).
 * (grammars named: json, json_arr, list, arithmetic, chess, english,
 * japanese, c; MIT-licensed, see tests/data/grammars/LICENSE) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../grammar.h"
#include "../json.h"
#include "../schema.h"
#include "test.h"

static Grammar *compile(const char *text) {
    Error e = {{0}};
    Grammar *g = grammar_new(text, strlen(text), &e);
    CHECK(g != NULL, "compiles: %s (%s)", text, e.msg);
    return g;
}

/* Every text in yes[] is a sentence of the grammar, none in no[] is. */
static void check_texts(Grammar *g, const char *what, const char *const *yes, const char *const *no) {
    for (int i = 0; yes[i]; i++) CHECK(grammar_matches(g, yes[i], strlen(yes[i])), "%s accepts \"%s\"", what, yes[i]);
    for (int i = 0; no[i]; i++) CHECK(!grammar_matches(g, no[i], strlen(no[i])), "%s refuses \"%s\"", what, no[i]);
    CHECK(grammar_error(g) == NULL, "%s: no bound hit", what);
}

static void check_grammar(const char *text, const char *const *yes, const char *const *no) {
    Grammar *g = compile(text);
    if (!g) return;
    check_texts(g, text, yes, no);
    grammar_free(g);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

static void test_constructs(void) {
    check_grammar("root ::= \"ab\" | \"c\"", LIST("ab", "c"), LIST("", "a", "abc", "b", "ac"));
    check_grammar("root ::= (\"a\" | \"b\")* \"c\"", LIST("c", "ac", "abbac"), LIST("", "a", "ca", "abc c"));
    check_grammar("root ::= \"x\"+", LIST("x", "xxxx"), LIST("", "y"));
    check_grammar("root ::= \"ab\"? \"c\"", LIST("c", "abc"), LIST("ac", "ababc"));
    check_grammar("root ::= \"ab\"{2}", LIST("abab"), LIST("ab", "ababab"));
    check_grammar("root ::= [0-9]{2,4}", LIST("12", "123", "1234"), LIST("1", "12345", "1a"));
    check_grammar("root ::= [a]{2,}", LIST("aa", "aaaaaaa"), LIST("a", ""));
    check_grammar("root ::= [a]{0,1} \"b\"", LIST("b", "ab"), LIST("aab"));
    check_grammar("root ::= [^a-z]", LIST("A", "0", "é", "\xF0\x9F\x98\x80"), LIST("a", "q", "", "AB"));
    check_grammar("root ::= [a-cx-z_]+", LIST("abc", "x_z"), LIST("d", "w"));
    check_grammar("root ::= .", LIST("a", "\n", "é", "日"), LIST("", "ab", "\xC3", "\xED\xA0\x80"));
    /* Escapes in literals and classes; \x is a code point, not a byte. */
    check_grammar("root ::= \"\\n\\t\\\\\\\"\" [\\]\\-] \"\\x41\\u00e9\\U0001F600\"",
                  LIST("\n\t\\\"]A\xC3\xA9\xF0\x9F\x98\x80", "\n\t\\\"-Aé😀"), LIST("\n\t\\\"xAé😀"));
    check_grammar("root ::= \"\\xFF\"", LIST("\xC3\xBF"), LIST("\xFF"));
    /* Unicode literals and ranges across UTF-8 lengths. */
    check_grammar("root ::= \"日本\" [α-ω] [\\u0080-\\U0010FFFF]", LIST("日本αé", "日本ω\xF4\x8F\xBF\xBF", "日本λ\xE0\xA0\x80"),
                  LIST("日本aé", "日本αa", "日本α\xED\xA0\x80"));
    /* Rules, forward references, comments, names with - and _, newlines. */
    check_grammar("# greeting\nroot ::= greet-word ws name_1 # trailing\n"
                  "greet-word ::= \"hi\" |\n  \"hello\"\nws ::= \" \"*\nname_1 ::= [A-Z] [a-z]*\n",
                  LIST("hi Bob", "helloAnn", "hello   Z"), LIST("hi bob", "hey Bob", "hi"));
    /* Right recursion keeps no frames: a long run stays one state. */
    Grammar *g = compile("root ::= \"a\" root | \"\"");
    if (g) {
        GrammarState s = grammar_start(g), t = grammar_advance(g, s, "a", 1);
        CHECK(grammar_advance(g, t, "aaaaaaaa", 8) == t, "right recursion: the state repeats");
        grammar_free(g);
    }
    /* Nested (non-tail) recursion, a deep one. */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    if (g) {
        char text[2 * 1000 + 2];
        memset(text, '(', 1000);
        text[1000] = 'x';
        memset(text + 1001, ')', 1000);
        CHECK(grammar_matches(g, text, 2001), "1000 nested parentheses");
        CHECK(!grammar_matches(g, text, 2000), "one ')' short is not complete");
        grammar_free(g);
    }
    /* Too deep: the bound is an error, not a crash. */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    if (g) {
        size_t n = GRAMMAR_MAX_DEPTH + 10;
        char *text = malloc(n);
        memset(text, '(', n);
        CHECK(grammar_advance(g, grammar_start(g), text, n) == -1, "past the depth bound: rejected");
        CHECK(grammar_error(g) && strstr(grammar_error(g), "deeper"), "and the error says so");
        free(text);
        grammar_free(g);
    }
    /* An ambiguous grammar: every split of a run of a's is alive at once. */
    g = compile("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"");
    if (g) {
        CHECK(grammar_matches(g, "aaaaaaaaaaaaaaaaaaaaaaa", 23), "ambiguous runs still parse");
        grammar_free(g);
    }
    /* Finished: nothing can follow. */
    g = compile("root ::= \"ok\"");
    if (g) {
        GrammarState s = grammar_advance(g, grammar_start(g), "ok", 2);
        CHECK(grammar_finished(g, s), "\"ok\" read: finished");
        CHECK(!grammar_finished(g, grammar_advance(g, grammar_start(g), "o", 1)), "\"o\" read: not finished");
        grammar_free(g);
    }
}

/* A bad grammar is refused with a one-line message that contains want. */
static void refuse(const char *text, const char *want) {
    Error e = {{0}};
    Grammar *g = grammar_new(text, strlen(text), &e);
    CHECK(g == NULL, "refused: %s", text);
    CHECK(strstr(e.msg, want) != NULL && strchr(e.msg, '\n') == NULL, "error for '%s' says '%s' (got '%s')", text, want, e.msg);
    grammar_free(g);
}

static void test_errors(void) {
    refuse("", "no rule 'root'");
    refuse("start ::= \"a\"", "no rule 'root'");
    refuse("root ::= value", "undefined rule 'value'");
    refuse("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
    refuse("root \"a\"", "line 1, column 6: expected '::='");
    refuse("root ::= \"abc", "unterminated literal");
    refuse("root ::= [abc", "unterminated character class");
    refuse("root ::= (\"a\"", "expected ')'");
    refuse("root ::= \"a\" )", "unmatched ')'");
    refuse("root ::= [z-a]", "below its start");
    refuse("root ::= \"\\q\"", "unknown escape");
    refuse("root ::= \"\\\n\"", "unknown escape: '\\' before byte 0x0A");
    refuse("root ::= \x01", "unexpected byte 0x01");
    refuse("root ::= \"\\x4\"", "hex digits");
    refuse("root ::= \"\\uD800\"", "not a Unicode scalar value");
    refuse("root ::= \"a\"{3,2}", "below the minimum");
    refuse("root ::= \"a\"{1001}", "up to 1000");
    /* Each {0,1000} makes 1000 small rules: 2000 of them are too many. */
    size_t n = 2000 * 12 + 16;
    char *big = malloc(n);
    strcpy(big, "root ::= ");
    for (int i = 0; i < 2000; i++) strcat(big, "\"a\"{0,1000} ");
    refuse(big, "too large");
    free(big);
    refuse("root ::= root \"a\" | \"a\"", "rule 'root' is left-recursive");
    refuse("root ::= x\nx ::= \"\"? y\ny ::= x \"b\"", "left-recursive");
    refuse("root ::= <|im_end|>", "token references");
    refuse("root ::= \"\xC3\"", "invalid UTF-8");
    refuse("root ::= @", "unexpected '@'");
    /* Nesting past the bound. */
    char deep[400] = "root ::= ";
    for (int i = 0; i < 70; i++) strcat(deep, "(");
    refuse(deep, "nest deeper");
}

/* llama.cpp's grammars: texts chosen by reading each grammar. */
static Grammar *load(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "grammars/%s.gbnf", name);
    unsigned long len;
    char *text = test_data(path, &len);
    Error e = {{0}};
    Grammar *g = grammar_new(text, len, &e);
    CHECK(g != NULL, "%s compiles (%s)", name, e.msg);
    free(text);
    return g;
}

static void corpus(const char *name, const char *const *yes, const char *const *no) {
    Grammar *g = load(name);
    if (!g) return;
    check_texts(g, name, yes, no);
    grammar_free(g);
}

static void test_corpus(void) {
    corpus("json",
           LIST("{}", "{\"a\": 1}", "{\"a\":[1, -2.5e+3, true, null, \"x\\n\\u00e9\"], \"b\": {\"c\": false}}",
                "{\n  \"k\": \"v\"\n}", "{\"é日\": \"😀\"}", "{\"n\": 0}"),
           LIST("", "[]", "{", "{\"a\" 1}", "{'a': 1}", "{\"a\": 01x}", "{\"a\": \"\t\"}", "{\"a\": tru}",
                "{\"a\": \"\\x\"}", "{\"a\":1,}", "{}\n\n"));
    corpus("json_arr", LIST("[\n]", "[\n1,\n{\"a\": []}]", "[\n\"x\",\n 2]"), LIST("[]", "[\n1, 2]", "[\n1,\n2] "));
    corpus("list", LIST("- one\n", "- a b c\n- é\n"), LIST("", "- \n", "* one\n", "- one", "- a\rb\n"));
    corpus("arithmetic", LIST("1+2=3\n", "(a +b)*c= x1\n", "x=1\ny=2\n"), LIST("", "1+2\n", "1+=3\n", "A=1\n"));
    corpus("chess", LIST("1. e4 e5\n2. Nf3 Nc6\n", "1. e4 e5\n2. O-O-O Qxd8#\n", "1. d4 d5\n2. exd5 e8=Q+\n"),
           LIST("1. e4 e5\n", "1. e9 e5\n2. a3 a4\n", "2. e4 e5\n3. a3 a4\n", "1. e4 e5\n0. a3 a4\n"));
    corpus("english", LIST("Hello, world!", "a\tb\nc", "[x]"), LIST("", " lead", "two  spaces", "é"));
    corpus("japanese", LIST("こんにちは", "カタカナ 漢字、"), LIST("", "abc", "こ  ん"));
    corpus("c", LIST("", "int main(){return 0;}", "int f(int x){x = x+1;while(x<10){x = x*2;}return x;}",
                     "float g(){/* c */// d\nreturn 1;}"),
           LIST("int main(){return 0}", "main(){}", "int f(){x = ;}", "int f(){/* open}"));
}

/* The masks against the token-by-token truth: a token is allowed exactly
 * when its bytes advance the state (the end token: when complete). */
static void check_masks(Grammar *g, GrammarVocab *v, const Tokenizer *t, const char *prefix, int end_id) {
    GrammarState s = grammar_advance(g, grammar_start(g), prefix, strlen(prefix));
    CHECK(s >= 0, "prefix '%s' parses", prefix);
    size_t words = grammar_mask_words(v);
    uint64_t *mask = calloc(words, sizeof *mask), *again = calloc(words, sizeof *again);
    size_t n = grammar_fill_mask(g, v, s, mask);
    int vocab = tokenizer_vocab_size(t);
    size_t count = 0, wrong = 0;
    for (int id = 0; id < vocab; id++) {
        bool allowed;
        if (id == end_id) allowed = grammar_complete(g, s);
        else {
            size_t len;
            const char *b = tokenizer_token(t, id, &len);
            allowed = b && len > 0 && !tokenizer_is_special(t, id) && grammar_advance(g, s, b, len) >= 0;
        }
        bool bit = mask[id >> 6] >> (id & 63) & 1;
        if (bit != allowed) wrong++;
        if ((grammar_accept_token(g, v, s, id) >= 0) != allowed) wrong++;
        count += allowed;
    }
    CHECK(wrong == 0 && n == count, "mask after '%s': %zu tokens allowed, %zu by the check, %zu disagree", prefix, n, count, wrong);
    CHECK(grammar_fill_mask(g, v, s, again) == n && memcmp(mask, again, words * sizeof *mask) == 0, "the cached mask is the same");
    free(mask);
    free(again);
}

static void test_masks(void) {
    char path[] = "tests/data/qwen2.5-tokenizer.json";
    Error e;
    Tokenizer *t = tokenizer_load(path, &e);
    CHECK(t != NULL, "qwen2.5 tokenizer loads (%s)", t ? "" : e.msg);
    if (!t) return;
    int end = tokenizer_find(t, "<|im_end|>", 10);
    GrammarVocab *v = grammar_vocab_new(t, tokenizer_vocab_size(t), &end, 1);
    Grammar *g = load("json");
    if (g) {
        const char *prefixes[] = {"", "{", "{\"", "{\"ab", "{\"a\": ", "{\"a\": 12", "{\"a\": \"x\\", "{\"a\": \"\xE6\x97", "{}", "{\"a\": [1, {}]}\n"};
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) check_masks(g, v, t, prefixes[i], end);
        grammar_free(g);
    }
    g = load("japanese");
    if (g) {
        check_masks(g, v, t, "", end);
        check_masks(g, v, t, "こ\xE3", end);
        grammar_free(g);
    }
    /* Inside a string: the text of Qwen's <tool_call> (an added token that
     * is not special) is allowed, <|im_start|> and <|endoftext|> are not. */
    g = load("json");
    if (g) {
        uint64_t *mask = calloc(grammar_mask_words(v), sizeof *mask);
        GrammarState s = grammar_advance(g, grammar_start(g), "{\"a\": \"", 7);
        grammar_fill_mask(g, v, s, mask);
        int tool = tokenizer_find(t, "<tool_call>", 11), start = tokenizer_find(t, "<|im_start|>", 12),
            text_end = tokenizer_find(t, "<|endoftext|>", 13);
        CHECK(tool > 0 && (mask[tool >> 6] >> (tool & 63) & 1), "in a string: <tool_call> is allowed");
        CHECK(start > 0 && text_end > 0 && !(mask[start >> 6] >> (start & 63) & 1) && !(mask[text_end >> 6] >> (text_end & 63) & 1),
              "in a string: the special tokens <|im_start|> and <|endoftext|> are not");
        free(mask);
        grammar_free(g);
    }
    g = compile("root ::= \"yes\" | \"no\"");
    if (g) {
        uint64_t *mask = calloc(grammar_mask_words(v), sizeof *mask);
        GrammarState s = grammar_advance(g, grammar_start(g), "yes", 3);
        CHECK(grammar_fill_mask(g, v, s, mask) == 1 && (mask[end >> 6] >> (end & 63) & 1), "after \"yes\": only the end token");
        int yes = tokenizer_find(t, "yes", 3);
        CHECK(grammar_accept_token(g, v, grammar_start(g), yes) == s, "the token \"yes\" leads to the same state");
        CHECK(grammar_accept_token(g, v, grammar_start(g), end) == -1, "the end token before a complete parse: refused");
        free(mask);
        grammar_free(g);
    }
    grammar_vocab_free(v);
    tokenizer_free(t);
}

/* ---- JSON Schema ---- */

static Grammar *from_schema(const char *schema, size_t len, Error *e) {
    char *gbnf = schema_to_gbnf(schema, len, e);
    Grammar *g = gbnf ? grammar_new(gbnf, strlen(gbnf), e) : NULL;
    free(gbnf);
    return g;
}

/* The cases of scripts/make_schema_cases.py: a text the grammar accepts must
 * be valid by python's jsonschema; a valid one in the grammar's own form
 * ("canonical") must be accepted. */
static void test_schema_cases(void) {
    unsigned long len;
    char *text = test_data("schema_cases.json", &len);
    JsonDoc doc;
    Error e;
    if (json_parse(&doc, text, len, &e) != 0) {
        CHECK(false, "schema_cases.json parses (%s)", e.msg);
        free(text);
        return;
    }
    for (size_t i = 0; i < doc.root.len; i++) {
        const JsonValue *entry = &doc.root.items[i], *schema = json_get(entry, "schema"), *cases = json_get(entry, "cases");
        Grammar *g = from_schema(schema->string, schema->len, &e);
        CHECK(g != NULL, "schema %s converts (%s)", schema->string, g ? "" : e.msg);
        if (!g) continue;
        int unsound = 0, missed = 0, accepted = 0;
        for (size_t k = 0; k < cases->len; k++) {
            const JsonValue *c = &cases->items[k], *t = json_get(c, "text");
            bool valid = json_get(c, "valid")->boolean, canonical = json_get(c, "canonical")->boolean;
            bool ok = grammar_matches(g, t->string, t->len);
            accepted += ok;
            if (ok && !valid && unsound++ == 0) CHECK(false, "schema %s: accepts the invalid %s", schema->string, t->string);
            if (!ok && valid && canonical && missed++ == 0) CHECK(false, "schema %s: refuses the valid %s", schema->string, t->string);
        }
        CHECK(unsound == 0 && missed == 0 && grammar_error(g) == NULL, "schema %s: %zu texts, %d accepted, %d invalid accepted, %d valid refused",
              schema->string, cases->len, accepted, unsound, missed);
        grammar_free(g);
    }
    json_free(&doc);
    free(text);
}

/* The masks of the walk (the method under test, in grammar g) against the
 * plain per-token truth (the oracle, in a grammar of its own compiled from
 * the same text, so that nothing the walk caches is read): at state s (in g)
 * and o (in the oracle), token id is allowed exactly when grammar_advance
 * over its bytes from o does not reject (an end token: when o is complete;
 * special tokens never). Returns how many tokens disagree. */
static size_t masks_disagree(Grammar *g, GrammarState s, Grammar *oracle, GrammarState o, const GrammarVocab *v,
                             const Tokenizer *t, int end_id, uint64_t *mask) {
    size_t n = grammar_fill_mask(g, v, s, mask), count = 0, wrong = 0;
    for (int id = 0; id < tokenizer_vocab_size(t); id++) {
        bool allowed;
        if (id == end_id) allowed = grammar_complete(oracle, o);
        else {
            size_t len;
            const char *b = tokenizer_token(t, id, &len);
            allowed = b && len > 0 && !tokenizer_is_special(t, id) && grammar_advance(oracle, o, b, len) >= 0;
        }
        wrong += (mask[id >> 6] >> (id & 63) & 1) != allowed;
        count += allowed;
    }
    return wrong + (n != count);
}

/* Replays texts[0..n) token by token (the Qwen2.5 tokenizer's split) and
 * compares the mask with the oracle's at every state on the way, and at
 * every byte of the first text (states inside a character). */
static void check_masks_along(const char *gbnf, const char *what, const char *const *texts, size_t n, const GrammarVocab *v,
                              Tokenizer *t, int end_id) {
    Error e;
    Grammar *g = grammar_new(gbnf, strlen(gbnf), &e), *oracle = grammar_new(gbnf, strlen(gbnf), &e);
    CHECK(g && oracle, "%s compiles (%s)", what, g && oracle ? "" : e.msg);
    uint64_t *mask = calloc(grammar_mask_words(v), sizeof *mask);
    size_t states = 0, bad = 0;
    for (size_t i = 0; g && oracle && i < n; i++) {
        TokenIds ids = {0};
        size_t len = strlen(texts[i]);
        tokenizer_encode(t, texts[i], len, ENCODE_PLAIN, &ids);
        GrammarState s = grammar_start(g), o = grammar_start(oracle);
        for (size_t j = 0; j <= ids.n && s >= 0 && o >= 0; j++) {
            bad += masks_disagree(g, s, oracle, o, v, t, end_id, mask) != 0;
            states++;
            if (j == ids.n) break;
            size_t blen;
            const char *b = tokenizer_token(t, ids.ids[j], &blen);
            s = grammar_accept_token(g, v, s, ids.ids[j]);
            o = grammar_advance(oracle, o, b, blen);
        }
        CHECK(s >= 0 && o >= 0 && grammar_complete(oracle, o), "%s: the text %s is accepted token by token", what, texts[i]);
        token_ids_free(&ids);
        if (i > 0) continue;
        s = grammar_start(g), o = grammar_start(oracle);
        for (size_t k = 0; k < len && s >= 0; k++) {
            s = grammar_advance(g, s, texts[i] + k, 1);
            o = grammar_advance(oracle, o, texts[i] + k, 1);
            if (s < 0 || o < 0) break;
            bad += masks_disagree(g, s, oracle, o, v, t, end_id, mask) != 0;
            states++;
        }
    }
    CHECK(bad == 0 && grammar_error(g) == NULL, "%s: the masks at %zu states are the oracle's (%zu differ)", what, states, bad);
    free(mask);
    grammar_free(g);
    grammar_free(oracle);
}

/* The masks over the Qwen2.5 vocabulary for the schemas of the cases file,
 * at the states along two valid texts of each, and for grammars whose
 * characters lead apart (a Unicode range that ends inside a lead byte's
 * characters, a count, an ambiguous repetition). */
static void test_schema_masks(void) {
    Error e;
    Tokenizer *t = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    CHECK(t != NULL, "qwen2.5 tokenizer loads (%s)", t ? "" : e.msg);
    if (!t) return;
    int end = tokenizer_find(t, "<|im_end|>", 10);
    GrammarVocab *v = grammar_vocab_new(t, tokenizer_vocab_size(t), &end, 1);
    unsigned long len;
    char *text = test_data("schema_cases.json", &len);
    JsonDoc doc;
    if (json_parse(&doc, text, len, &e) != 0) {
        CHECK(false, "schema_cases.json parses (%s)", e.msg);
        free(text);
        return;
    }
    for (size_t i = 0; i < doc.root.len; i++) {
        const JsonValue *schema = json_get(&doc.root.items[i], "schema"), *cases = json_get(&doc.root.items[i], "cases");
        char *gbnf = schema_to_gbnf(schema->string, schema->len, &e);
        CHECK(gbnf != NULL, "schema %s converts", schema->string);
        if (!gbnf) continue;
        const char *texts[2];
        size_t n = 0;
        for (size_t k = 0; k < cases->len && n < 2; k++) {
            const JsonValue *c = &cases->items[k];
            if (json_get(c, "valid")->boolean && json_get(c, "canonical")->boolean) texts[n++] = json_get(c, "text")->string;
        }
        check_masks_along(gbnf, schema->string, texts, n, v, t, end);
        free(gbnf);
    }
    json_free(&doc);
    free(text);
    check_masks_along("root ::= \"\\\"\" [a-z\\u00e0-\\u00ff\\u4e00-\\u9fa5]{0,7} \"\\\"\"", "a counted class cut inside a lead byte",
                      LIST("\"ab\xE4\xB8\x80\xC3\xA9\xE9\xBE\xA5\""), 1, v, t, end);
    check_masks_along("root ::= ([a-z ]* \"ab\" [a-z ]*)+ \"!\"", "an ambiguous repetition", LIST("x ab yab!", "ab!"), 2, v, t, end);
    grammar_vocab_free(v);
    tokenizer_free(t);
}

/* A schema the converter does not support is refused, naming what. */
static void refuse_schema(const char *schema, const char *want) {
    Error e = {{0}};
    char *gbnf = schema_to_gbnf(schema, strlen(schema), &e);
    CHECK(gbnf == NULL && strstr(e.msg, want) && !strchr(e.msg, '\n'), "schema %s refused with '%s' (got '%s')", schema, want, e.msg);
    free(gbnf);
}

static void test_schema_refusals(void) {
    refuse_schema("{\"type\": \"string\", \"format\": \"email\"}", "format 'email' is not supported");
    refuse_schema("{\"type\": \"integer\", \"multipleOf\": 3}", "keyword 'multipleOf' is not supported");
    refuse_schema("{\"properties\": {\"a\": {\"patternProperties\": {}}}}", "schema at /properties/a: keyword 'patternProperties'");
    refuse_schema("{\"type\": \"array\", \"uniqueItems\": true}", "uniqueItems");
    refuse_schema("{\"type\": \"number\", \"minimum\": 0.5}", "inclusive integer bound");
    refuse_schema("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}", "oneOf whose branches");
    refuse_schema("{\"$ref\": \"#/$defs/missing\"}", "names no definition");
    refuse_schema("{\"$ref\": \"http://example.com/s.json\"}", "not supported");
    refuse_schema("{\"allOf\": [{}, {}]}", "allOf");
    refuse_schema("{\"type\": \"string\", \"pattern\": \"(?=a)\"}", "lookarounds");
    refuse_schema("{\"type\": \"string\", \"pattern\": \"a\\\\1\"}", "back-reference");
    refuse_schema("{\"type\": \"string\", \"pattern\": \"a^b\"}", "anchors");
    refuse_schema("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer lies between");
    refuse_schema("{\"type\": \"unknown\"}", "unknown type 'unknown'");
    refuse_schema("false", "allows no value");
    refuse_schema("{\"type\": \"object\", \"required\": [\"x\"], \"additionalProperties\": false}", "required property 'x'");
    refuse_schema("{\"type\": [\"string\", \"integer\"], \"enum\": [true]}", "no value of the enum");
    refuse_schema("{\"type\": ", "the schema is not JSON");
    /* Deep nesting is bounded. */
    char deep[2000] = "";
    for (int i = 0; i < 80; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 80; i++) strcat(deep, "}");
    refuse_schema(deep, "nest deeper");
    /* A recursive schema is fine: the rule refers to itself. */
    Error e;
    const char *tree = "{\"type\": \"object\", \"properties\": {\"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}}}";
    Grammar *g = from_schema(tree, strlen(tree), &e);
    CHECK(g != NULL, "a recursive schema converts (%s)", g ? "" : e.msg);
    if (g) {
        const char *t = "{\"kids\": [{}, {\"kids\": [{\"kids\": []}]}]}";
        CHECK(grammar_matches(g, t, strlen(t)), "and accepts a tree");
        grammar_free(g);
    }
}

/* Whitespace between tokens is bounded: a run of SCHEMA_MAX_SPACE is
 * accepted, one longer is not. */
static void test_schema_whitespace(void) {
    Error e;
    const char *schema = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}";
    Grammar *g = from_schema(schema, strlen(schema), &e);
    CHECK(g != NULL, "converts (%s)", g ? "" : e.msg);
    if (!g) return;
    char text[128];
    snprintf(text, sizeof text, "{%*s\"a\":1}", SCHEMA_MAX_SPACE, "");
    CHECK(grammar_matches(g, text, strlen(text)), "%d spaces after '{'", SCHEMA_MAX_SPACE);
    snprintf(text, sizeof text, "{%*s\"a\":1}", SCHEMA_MAX_SPACE + 1, "");
    CHECK(!grammar_matches(g, text, strlen(text)), "%d spaces after '{': refused", SCHEMA_MAX_SPACE + 1);
    GrammarState s = grammar_advance(g, grammar_start(g), "{\"a\": 1}", 8);
    CHECK(grammar_finished(g, s), "nothing after the closing brace");
    grammar_free(g);
}

/* Two schemas in one grammar (schema_gbnf_rules), each under its prefix,
 * beside the basics once; a recursive $ref resolves inside its own schema. */
static void test_schema_rules(void) {
    const char *a = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, "
                    "\"required\": [\"n\"]}";
    const char *b = "{\"$defs\": {\"l\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/l\"}, \"maxItems\": 2}}, "
                    "\"$ref\": \"#/$defs/l\"}";
    JsonDoc da, db;
    Error e;
    json_parse(&da, a, strlen(a), &e);
    json_parse(&db, b, strlen(b), &e);
    char *ra = schema_gbnf_rules(&da.root, "tool0-", &e), *rb = schema_gbnf_rules(&db.root, "tool1-", &e);
    CHECK(ra && rb, "both convert");
    CHECK(!schema_gbnf_rules(&da.root, "bad prefix", &e) && strstr(e.msg, "prefix"), "a prefix with a space: refused");
    if (ra && rb) {
        size_t n = strlen(ra) + strlen(rb) + strlen(schema_gbnf_basics()) + 64;
        char *text = malloc(n);
        snprintf(text, n, "root ::= tool0-1 \";\" tool1-1\n%s%s%s", ra, rb, schema_gbnf_basics());
        Grammar *g = compile(text);
        const char *const yes[] = {"{\"n\": 3};[[], [[]]]", "{ \"n\":9 };[]", NULL};
        const char *const no[] = {"{\"n\": 0};[]", "{\"n\": 3};[[], [], []]", "{\"n\": 3}", "{};[]", NULL};
        if (g) check_texts(g, "two schemas under prefixes", yes, no);
        grammar_free(g);
        free(text);
    }
    free(ra), free(rb);
    json_free(&da), json_free(&db);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_constructs();
    test_errors();
    test_corpus();
    test_masks();
    test_schema_cases();
    test_schema_masks();
    test_schema_refusals();
    test_schema_whitespace();
    test_schema_rules();
    return test_summary("test_grammar");
}
