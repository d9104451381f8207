/* fuzz_encode.c - libFuzzer target: tokenizer_encode on arbitrary bytes,
 * with the tokenizers of tokenizers.h (loaded once; run from the repository
 * root). The first byte picks the tokenizer (bits 1-2, modulo their number)
 * and the mode (bit 0: plain text, else added tokens are read; bit 3: the
 * post-processor's special tokens are added); the rest is the text.
 * Every id must be a token; with special tokens the ids must be the
 * tokenizer's prefix, the ids without them, then its suffix. The ids must
 * decode to the text itself as encoding sees it (ill-formed UTF-8 replaced,
 * then NFC when the tokenizer normalizes; for the SentencePiece-style one,
 * with '▁' read as a space): in plain mode always, and with added tokens
 * too when the tokenizer has no normalizer (its added tokens decode to their
 * own text). */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tokenizer.h"
#include "../../unicode.h"
#include "tokenizers.h"

/* s[0..*len) with each U+2581 '▁' replaced by a space, in place. */
static void spaces_for_metaspace(char *s, size_t *len) {
    size_t n = 0;
    for (size_t i = 0; i < *len; i++)
        if (i + 2 < *len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) s[n++] = ' ', i += 2;
        else s[n++] = s[i];
    *len = n;
}

/* What encoding reads in text[0..len): valid UTF-8, in NFC if nfc. */
static char *expected_text(const char *text, size_t len, bool nfc, size_t *out_len) {
    char *valid;
    size_t valid_len;
    if (utf8_lossy(text, len, &valid, &valid_len) == 0) {
        valid = malloc(len + 1);
        memcpy(valid, text, len);
        valid_len = len;
    }
    if (!nfc) {
        *out_len = valid_len;
        return valid;
    }
    char *normalized = nfc_normalize(valid, valid_len, out_len);
    free(valid);
    return normalized;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int which = (data[0] >> 1 & 3) % N_TOKENIZERS;
    Tokenizer *t = tokenizers[which];
    EncodeMode base = data[0] & 1 ? ENCODE_PLAIN : ENCODE_ADDED_TOKENS;
    bool special = data[0] & 8;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    TokenIds ids = {0}, with_special = {0};
    tokenizer_encode(t, text, len, base, &ids);
    assert((ids.n == 0) == (len == 0));
    for (size_t i = 0; i < ids.n; i++) {
        size_t n;
        assert(tokenizer_token(t, ids.ids[i], &n) != NULL);
    }
    if (special) {
        size_t n_prefix, n_suffix;
        const int *prefix = tokenizer_special_prefix(t, &n_prefix), *suffix = tokenizer_special_suffix(t, &n_suffix);
        tokenizer_encode(t, text, len, base | ENCODE_ADD_SPECIAL, &with_special);
        assert(with_special.n == n_prefix + ids.n + n_suffix);
        assert(n_prefix == 0 || memcmp(with_special.ids, prefix, n_prefix * sizeof *prefix) == 0);
        assert(ids.n == 0 || memcmp(with_special.ids + n_prefix, ids.ids, ids.n * sizeof *ids.ids) == 0);
        assert(n_suffix == 0 || memcmp(with_special.ids + n_prefix + ids.n, suffix, n_suffix * sizeof *suffix) == 0);
    }

    size_t decoded_len;
    char *decoded = tokenizer_decode(t, ids.ids, ids.n, &decoded_len);
    if (base == ENCODE_PLAIN || (!tokenizer_nfc[which] && !tokenizer_sp[which])) {
        size_t want_len;
        char *want = expected_text(text, len, tokenizer_nfc[which], &want_len);
        if (tokenizer_sp[which]) spaces_for_metaspace(want, &want_len);
        assert(decoded_len == want_len && memcmp(decoded, want, want_len) == 0);
        free(want);
    }
    free(decoded);
    token_ids_free(&ids);
    token_ids_free(&with_special);
    return 0;
}
