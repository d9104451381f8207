/* fuzz_tokenizer_cache.c - libFuzzer target: the bytes as a prepared
 * tokenizer (tokenizer_cache.h) of the small GPT-2 style tokenizer.json,
 * with the key of that file (copied to a scratch folder) written into the
 * header, so that the fuzzer reaches past the key. When tokenizer_cache_check accepts them,
 * every table must lie inside the bytes; then the file goes beside a copy of
 * that tokenizer.json in a scratch folder, and a tokenizer loaded with it
 * must encode and decode texts into and from ids inside its vocabulary,
 * whatever the tables say. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tokenizer.h"
#include "../../tokenizer_cache.h"

static char dir[] = "/tmp/fuzz_tokenizer_cache.XXXXXX";
static char json_path[128], run_path[128];
static uint64_t key;

static void remove_scratch(void) {
    remove(run_path);
    remove(json_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(json_path, sizeof json_path, "%s/tokenizer.json", dir);
    snprintf(run_path, sizeof run_path, "%s/tokenizer.run", dir);
    char *text;
    size_t len;
    Error e;
    if (read_file("tests/data/gpt2-style-tokenizer.json", &text, &len, &e) != 0) {
        fprintf(stderr, "%s (run from the repository root)\n", e.msg);
        exit(1);
    }
    FILE *f = fopen(json_path, "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) exit(1);
    free(text);
    if (tokenizer_cache_key(json_path, &key) != 0) exit(1);
    atexit(remove_scratch);
    return 0;
}

/* Whether [p, p + n) lies inside [data, data + size). */
static bool inside(const void *p, size_t n, const unsigned char *data, size_t size) {
    const unsigned char *q = p;
    return q >= data && n <= size && q <= data + size - n;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size) {
    /* An aligned copy (a mapping starts on a page), with this key. */
    unsigned char *data = malloc(size + 1);
    memcpy(data, input, size);
    if (size >= 24) memcpy(data + 16, &key, 8);
    TokenTables t;
    Error e;
    int rc = tokenizer_cache_check(&t, data, size, key, "fuzz.run", &e);
    if (rc != 0) {
        assert(strncmp(e.msg, "fuzz.run: ", 10) == 0);
    } else {
        size_t ids = (size_t)t.vocab_size + 1;
        assert(inside(t.start, ids * 4, data, size) && inside(t.bytes, t.start[t.vocab_size], data, size));
        assert(inside(t.vocab, t.vocab_slots * sizeof *t.vocab, data, size));
        assert(inside(t.merges, t.merge_slots * sizeof *t.merges, data, size));
        if (t.piece_start)
            assert(inside(t.piece_start, ids * 4, data, size) && inside(t.piece_bytes, t.piece_start[t.vocab_size], data, size));
        assert(inside(t.rest, t.rest_len, data, size));
    }

    /* The tokenizer with these bytes as its prepared tables (made again
     * from the JSON when they do not do). */
    FILE *f = fopen(run_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
    free(data);
    Tokenizer *tok = tokenizer_load_prepared(json_path, &e);
    assert(tok);
    static const char *const texts[] = {"Hello world", "The tokenizer turns text into numbers.", " \n\t12 \xC3\xA9\xE2\x82\xAC!",
                                        "<s>a</s>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        TokenIds got = {0};
        tokenizer_encode(tok, texts[i], strlen(texts[i]), ENCODE_ADDED_TOKENS, &got);
        for (size_t k = 0; k < got.n; k++) assert(got.ids[k] >= 0 && got.ids[k] < tokenizer_vocab_size(tok));
        size_t len;
        free(tokenizer_decode(tok, got.ids, got.n, &len));
        token_ids_free(&got);
    }
    tokenizer_free(tok);
    return 0;
}
