/* fuzz_encode.c - libFuzzer target: tokenizer_encode on arbitrary bytes,
 * with the real Qwen2.5 vocabulary (loaded once; run from the repository
 * root). The first byte picks the mode, the rest is the text. Every id must
 * be a token, and in plain mode the ids must decode to the text itself, as
 * encoding sees it: ill-formed UTF-8 replaced, then NFC. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tokenizer.h"
#include "../../unicode.h"
#include "qwen_tokenizer.h"

/* What plain encoding reads in text[0..len): valid UTF-8, in NFC. */
static char *expected_text(const char *text, size_t len, size_t *out_len) {
    char *valid;
    size_t valid_len;
    if (utf8_lossy(text, len, &valid, &valid_len) == 0) valid = NULL, valid_len = len;
    char *nfc = nfc_normalize(valid ? valid : text, valid_len, out_len);
    free(valid);
    return nfc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    EncodeMode mode = data[0] & 1 ? ENCODE_PLAIN : ENCODE_ADDED_TOKENS;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    TokenIds ids = {0};
    tokenizer_encode(tokenizer, text, len, mode, &ids);
    assert((ids.n == 0) == (len == 0));
    for (size_t i = 0; i < ids.n; i++) {
        size_t n;
        assert(tokenizer_token(tokenizer, ids.ids[i], &n) != NULL);
    }
    size_t decoded_len;
    char *decoded = tokenizer_decode(tokenizer, ids.ids, ids.n, &decoded_len);
    if (mode == ENCODE_PLAIN) {
        size_t want_len;
        char *want = expected_text(text, len, &want_len);
        assert(decoded_len == want_len && memcmp(decoded, want, want_len) == 0);
        free(want);
    }
    free(decoded);
    token_ids_free(&ids);
    return 0;
}
