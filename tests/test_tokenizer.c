/* test_tokenizer.c - the tokenizer against Hugging Face's: the golden file
 * (tests/data/qwen2.5.jsonl holds texts with the ids and the decoded text of
 * HF's tokenizers library), the regex split on its edge cases (pieces worked
 * out by hand from the regex, and checked with HF's pre-tokenizer), NFC,
 * added tokens, decoding and streaming, invalid input, long and random input,
 * and hostile tokenizer.json files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../json.h"
#include "../tokenizer.h"
#include "../unicode.h"
#include "test.h"

static Tokenizer *load(const char *name) {
    char *path = path_join("tests/data", name);
    Error e;
    Tokenizer *t = tokenizer_load(path, &e);
    if (!t) die("%s", e.msg);
    free(path);
    return t;
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

/* ---- the golden file ---- */

/* Every line's text encodes to its ids, and its ids decode to its text; the
 * Qwen3 tokenizer (merges written as pairs) agrees with Qwen2.5's (merges as
 * "a b" strings) on every text read as plain text. */
static void test_golden(Tokenizer *qwen25, Tokenizer *qwen3) {
    unsigned long size;
    char *data = test_data("qwen2.5.jsonl", &size);
    int n_lines = 0, n_with_nul = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        Error e;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("qwen2.5.jsonl: %s", e.msg);
        const JsonValue *text = json_get(&doc.root, "text"), *ids = json_get(&doc.root, "ids"),
                        *decoded = json_get(&doc.root, "decoded");
        int *want = xmalloc((ids->len + 1) * sizeof *want);
        for (size_t i = 0; i < ids->len; i++) want[i] = (int)ids->items[i].number.integer;
        n_lines++;
        n_with_nul += memchr(text->string, '\0', text->len) != NULL;

        TokenIds got = {0};
        CHECK(tokenizer_encode(qwen25, text->string, text->len, ENCODE_ADDED_TOKENS, &got) == 0,
              "line %d: valid UTF-8", n_lines);
        CHECK(same_ids(&got, want, ids->len), "line %d encodes to the golden ids: %.60s", n_lines, line);
        size_t len;
        char *back = decode(qwen25, want, ids->len, &len);
        CHECK(same_bytes(back, len, decoded->string, decoded->len), "line %d decodes to the golden text", n_lines);
        free(back);

        TokenIds plain25 = {0}, plain3 = {0};
        tokenizer_encode(qwen25, text->string, text->len, ENCODE_PLAIN, &plain25);
        tokenizer_encode(qwen3, text->string, text->len, ENCODE_PLAIN, &plain3);
        CHECK(same_ids(&plain3, plain25.ids, plain25.n), "line %d: Qwen3's pair merges give Qwen2.5's ids", n_lines);
        token_ids_free(&got);
        token_ids_free(&plain25);
        token_ids_free(&plain3);
        free(want);
        json_free(&doc);
    }
    free(data);
    CHECK(n_lines == 415, "golden lines read: %d", n_lines);
    CHECK(n_with_nul == 2, "golden lines with U+0000: %d", n_with_nul);
}

/* ---- the pre-tokenizer regex ---- */

/* text splits into exactly the pieces given, NULL-terminated. */
static void check_split(const char *text, const char *const *pieces, const char *what) {
    size_t n = strlen(text), at = 0, k = 0;
    bool ok = true;
    while (at < n && ok) {
        size_t end = tokenizer_piece_end(text, n, at);
        ok = pieces[k] && end > at && same_bytes(text + at, end - at, pieces[k], strlen(pieces[k]));
        at = end;
        k++;
    }
    CHECK(ok && pieces[k] == NULL, "split of %s", what);
}

#define SPLIT(text, ...) check_split(text, (const char *const[]){__VA_ARGS__, NULL}, #text)

static void test_split(void) {
    /* White space: a run before text leaves its last space to the text's
     * piece; a run with newlines ends at its last newline. */
    SPLIT("x  \n  y", "x", "  \n", " ", " y");
    SPLIT("a   b", "a", "  ", " b");
    SPLIT("a  ", "a", "  ");
    SPLIT("  a", " ", " a");
    SPLIT("\n\n\n", "\n\n\n");
    SPLIT(" \n \n x", " \n \n", " x");
    SPLIT("\t\tx", "\t", "\tx");
    SPLIT("...   ", "...", "   ");
    SPLIT("  !!\n\nx", " ", " !!\n\n", "x");
    SPLIT("?\r\n\r\nok", "?\r\n\r\n", "ok");
    /* Numbers one digit at a time, fullwidth digits too. */
    SPLIT("1234567", "1", "2", "3", "4", "5", "6", "7");
    SPLIT("$100.50", "$", "1", "0", "0", ".", "5", "0");
    SPLIT("x\xEF\xBC\x91\xEF\xBC\x92", "x", "\xEF\xBC\x91", "\xEF\xBC\x92");
    /* CJK: punctuation starts the next word's piece (one character may
     * precede letters), a lone one stands alone. */
    SPLIT("\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82", "\xE4\xBD\xA0\xE5\xA5\xBD",
          "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", "\xE3\x80\x82");
    /* Emoji are punctuation to the regex, joining a space before them. */
    SPLIT("emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!", "emoji",
          " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD!");
    /* Contractions, in any case; a quote before other letters is no
     * contraction, and neither is one before U+017F LONG S. */
    SPLIT("DON'T", "DON", "'T");
    SPLIT("don't", "don", "'t");
    SPLIT("I'm", "I", "'m");
    SPLIT("'S 's 'Ll 'VE 're 'x", "'S", " '", "s", " '", "Ll", " '", "VE", " '", "re", " '", "x");
    SPLIT("\xC5\xBF'\xC5\xBF", "\xC5\xBF", "'\xC5\xBF");
    SPLIT("'", "'");
    /* Unicode white space: U+3000, U+0085, U+00A0 and U+2028 are \s (and
     * may lead letters); U+FEFF and U+200B are not, so they lead as
     * punctuation; a combining mark is neither letter nor space. */
    SPLIT("a\xE3\x80\x80" "b", "a", "\xE3\x80\x80" "b");
    SPLIT("a\xC2\x85" "b", "a", "\xC2\x85" "b");
    SPLIT("a\xC2\xA0\xC2\xA0" "b", "a", "\xC2\xA0", "\xC2\xA0" "b");
    SPLIT("a \xE2\x80\xA8" "b", "a", " ", "\xE2\x80\xA8" "b");
    SPLIT("a\xEF\xBB\xBF" "b", "a", "\xEF\xBB\xBF" "b");
    SPLIT("a\xE2\x80\x8B" "b", "a", "\xE2\x80\x8B" "b");
    SPLIT("x\xCC\x81y", "x", "\xCC\x81y");
    /* NUL is an ordinary character (text comes with its length). */
    const char nul[] = "a\0b";
    size_t end = tokenizer_piece_end(nul, 3, 1);
    CHECK(tokenizer_piece_end(nul, 3, 0) == 1 && end == 3, "split of a, NUL b");
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
    refuse(base, "\"ignore_merges\":false", "\"ignore_merges\":true", "BPE options");
    refuse(base, "{\"type\":\"NFC\"}", "{\"type\":\"NFKC\"}", "normalizer NFKC is not supported");
    refuse(base, "(?i:'s|", "(?i:'S|", "regex is not the Qwen2 one");
    refuse(base, "\"type\":\"Sequence\"", "\"type\":\"Whitespace\"", "pre_tokenizer is not the Qwen2 one");
    refuse(base, "\"behavior\":\"Isolated\"", "\"behavior\":\"Removed\"", "Split options");
    refuse(base, "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]",
           "\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":false}]", "ByteLevel options");
    refuse(base, "\"decoder\"", "\"decoder_\"", "decoder (missing) is not supported");
    refuse(base, "\"post_processor\":{\"type\":\"ByteLevel\"", "\"post_processor\":{\"type\":\"TemplateProcessing\"",
           "post_processor TemplateProcessing");
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
    refuse(base, "\"id\":257", "\"id\":256", "token id 256 is given twice");
    refuse(base, "\"id\":257", "\"id\":null", "\"id\" is not an integer");
    refuse(base, "\"content\":\"<|end|>\"", "\"content\":\"\"", "non-empty string");
    refuse(base, "\"content\":\"<|end|>\"", "\"content\":7", "non-empty string");
    refuse(base, "\"lstrip\":false", "\"lstrip\":true", "not supported");
    refuse(base, "\"normalized\":false", "\"normalized\":true", "not supported");
    refuse(base, "\"special\":true", "\"special\":\"yes\"", "\"special\" is not a boolean");
    refuse(base, "\"added_tokens\":[", "\"added_tokens\":{\"x\":1},\"y\":[", "is an object, not an array");
    refuse(base, "\"version\"", "\"version\" \"", "line 1, column");

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

int main(void) {
    Tokenizer *qwen25 = load("qwen2.5-tokenizer.json"), *qwen3 = load("qwen3-tokenizer.json");
    test_golden(qwen25, qwen3);
    CHECK(tokenizer_vocab_size(qwen3) == 151669 && tokenizer_find(qwen3, "<think>", 7) == 151667,
          "Qwen3's tokenizer has its 4 more added tokens");
    test_split();
    test_hf_ids(qwen25);
    test_tokens(qwen25);
    test_invalid_input(qwen25);
    test_decode(qwen25);
    test_long_and_random(qwen25);
    test_hostile();
    tokenizer_free(qwen25);
    tokenizer_free(qwen3);
    return test_summary("test_tokenizer");
}
