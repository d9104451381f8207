/* fuzz_decode.c - libFuzzer target: the streaming decoder on arbitrary id
 * sequences, with each tokenizer of tokenizers.h in turn (loaded once; run
 * from the repository root). Each 4 bytes are one id (int32, little-endian):
 * a negative one stays out of range, a non-negative one is taken modulo
 * vocab_size + 1, so that most are tokens and vocab_size itself is not.
 * The stream must give out whole UTF-8 characters only, and its pieces and
 * flush must add up to tokenizer_decode() of the same ids, which must be the
 * text of the ids that have a token (the others give none). (With a
 * ByteFallback decoder, a run of byte tokens that was valid UTF-8 and is no
 * longer once more bytes join it has been given out already: there the
 * stream may differ from the decoded text, which has one U+FFFD per byte
 * of the run; the check is made when the text has no U+FFFD.) */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tokenizer.h"
#include "../../unicode.h"
#include "tokenizers.h"

static bool is_valid_utf8(const char *s, size_t n) {
    char *fixed;
    size_t fixed_len;
    size_t bad = utf8_lossy(s, n, &fixed, &fixed_len);
    free(fixed);
    return bad == 0;
}

static void check_decode(const Tokenizer *tokenizer, const uint8_t *data, size_t size) {
    size_t n = size / 4, n_tokens = 0;
    int *ids = malloc((n ? n : 1) * sizeof *ids), *tokens = malloc((n ? n : 1) * sizeof *tokens);
    for (size_t i = 0; i < n; i++) {
        int32_t v = (int32_t)((uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 | (uint32_t)data[4 * i + 2] << 16 |
                              (uint32_t)data[4 * i + 3] << 24);
        ids[i] = v < 0 ? v : v % (tokenizer_vocab_size(tokenizer) + 1);
        size_t unused;
        if (tokenizer_token(tokenizer, ids[i], &unused)) tokens[n_tokens++] = ids[i];
    }

    /* The stream, piece by piece. */
    DecodeStream d;
    decode_stream_init(&d, tokenizer);
    char *streamed = malloc(1);
    size_t streamed_len = 0, piece_len;
    for (size_t i = 0; i <= n; i++) {
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &piece_len) : decode_stream_flush(&d, &piece_len);
        assert(is_valid_utf8(piece, piece_len));
        streamed = realloc(streamed, streamed_len + piece_len + 1);
        memcpy(streamed + streamed_len, piece, piece_len);
        streamed_len += piece_len;
    }
    decode_stream_free(&d);

    size_t len, tokens_len;
    char *text = tokenizer_decode(tokenizer, ids, n, &len);
    char *tokens_text = tokenizer_decode(tokenizer, tokens, n_tokens, &tokens_len);
    bool replaced = false;
    for (size_t i = 0; i + 2 < len && !replaced; i++) replaced = memcmp(text + i, "\xEF\xBF\xBD", 3) == 0;
    assert((replaced && !tokenizer_pre_tokenizer(tokenizer)->byte_level) ||
           (len == streamed_len && memcmp(text, streamed, len) == 0));
    assert(len == tokens_len && memcmp(text, tokens_text, len) == 0);
    free(text);
    free(tokens_text);
    free(streamed);
    free(tokens);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int i = 0; i < N_TOKENIZERS; i++) check_decode(tokenizers[i], data, size);
    return 0;
}
