/* fuzz_tokenizer.c - libFuzzer target: the bytes as a tokenizer.json, loaded
 * through a scratch file (tokenizer_load reads a path). A tokenizer that
 * loads must encode any text into its own ids; a byte-level one's decode
 * back to the text as encoding sees it: ill-formed UTF-8 replaced, then NFC
 * if the tokenizer normalizes (a SentencePiece-style one may drop, add or
 * replace characters, and its text must be valid UTF-8, streamed too);
 * with special tokens, the ids must be its prefix, the same ids, then its
 * suffix. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tokenizer.h"
#include "../../unicode.h"

static char path[] = "/tmp/fuzz_tokenizer.XXXXXX";

static void remove_scratch(void) { remove(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
    atexit(remove_scratch);
    return 0;
}

/* A SentencePiece-style tokenizer's text of ids (decoded, [len]) is valid
 * UTF-8, and so is each piece the stream gives out. */
static void check_sentencepiece_decode(const Tokenizer *t, const int *ids, size_t n, const char *decoded, size_t len) {
    char *fixed;
    size_t fixed_len;
    assert(utf8_lossy(decoded, len, &fixed, &fixed_len) == 0);
    DecodeStream d;
    decode_stream_init(&d, t);
    for (size_t i = 0; i <= n; i++) {
        size_t piece_len;
        const char *piece = i < n ? decode_stream_push(&d, ids[i], &piece_len) : decode_stream_flush(&d, &piece_len);
        assert(utf8_lossy(piece, piece_len, &fixed, &fixed_len) == 0);
    }
    decode_stream_free(&d);
}

/* Every byte value, an added token's text, letters, digits, spaces and
 * accents that NFC composes. */
static void check_round_trip(Tokenizer *t) {
    char text[512];
    size_t len = 0;
    for (int b = 0; b < 256; b++) text[len++] = (char)b;
    const char *more = "<|im_end|> Hello, world! 12345 \t\n e\xcc\x81 \xe4\xb8\x96";
    memcpy(text + len, more, strlen(more));
    len += strlen(more);

    TokenIds ids = {0}, with_special = {0};
    tokenizer_encode(t, text, len, ENCODE_PLAIN, &ids);
    char *valid;
    size_t decoded_len, valid_len, nfc_len;
    char *decoded = tokenizer_decode(t, ids.ids, ids.n, &decoded_len);
    assert(utf8_lossy(text, len, &valid, &valid_len) > 0);
    char *nfc = nfc_normalize(valid, valid_len, &nfc_len);
    if (tokenizer_pre_tokenizer(t)->byte_level)
        assert((decoded_len == valid_len && memcmp(decoded, valid, valid_len) == 0) ||
               (decoded_len == nfc_len && memcmp(decoded, nfc, nfc_len) == 0));
    else
        check_sentencepiece_decode(t, ids.ids, ids.n, decoded, decoded_len);

    size_t n_prefix, n_suffix;
    const int *prefix = tokenizer_special_prefix(t, &n_prefix), *suffix = tokenizer_special_suffix(t, &n_suffix);
    tokenizer_encode(t, text, len, ENCODE_PLAIN | ENCODE_ADD_SPECIAL, &with_special);
    assert(with_special.n == n_prefix + ids.n + n_suffix);
    assert(n_prefix == 0 || memcmp(with_special.ids, prefix, n_prefix * sizeof *prefix) == 0);
    assert(memcmp(with_special.ids + n_prefix, ids.ids, ids.n * sizeof *ids.ids) == 0);
    assert(n_suffix == 0 || memcmp(with_special.ids + n_prefix + ids.n, suffix, n_suffix * sizeof *suffix) == 0);
    for (size_t i = 0; i < with_special.n; i++) {
        size_t n;
        assert(tokenizer_token(t, with_special.ids[i], &n) != NULL);
    }
    free(nfc);
    free(valid);
    free(decoded);
    token_ids_free(&ids);
    token_ids_free(&with_special);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    assert(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    Error e;
    Tokenizer *t = tokenizer_load(path, &e);
    if (!t) {
        assert(strncmp(e.msg, path, strlen(path)) == 0);
        return 0;
    }
    check_round_trip(t);
    tokenizer_free(t);
    return 0;
}
