/* test_tokenizer_cache.c - the prepared tokenizer (tokenizer_cache.h): a
 * first load writes tokenizer.run, the next maps it, and either way the
 * tokenizer gives Hugging Face's ids (tests/data/gpt2-style.jsonl, from
 * HF's tokenizers library); a damaged file is refused and made again, one
 * for another tokenizer.json is made again, and a file whose tables or
 * whose copy of the JSON were edited shows the edit (so both really come
 * from the file). */
#define _GNU_SOURCE  /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../json.h"
#include "../tokenizer.h"
#include "../tokenizer_cache.h"
#include "test.h"

static char json_path[512], run_path[512];

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) die("cannot write %s", path);
}

/* The file at path in a fresh buffer (8-byte aligned, as a mapping is). */
static unsigned char *read_bytes(const char *path, size_t *n) {
    char *data;
    Error e;
    if (read_file(path, &data, n, &e) != 0) return NULL;
    return (unsigned char *)data;
}

/* The key of the tokenizer.json now in the scratch folder. */
static uint64_t json_key(void) {
    uint64_t key;
    if (tokenizer_cache_key(json_path, &key) != 0) die("cannot stat %s", json_path);
    return key;
}

/* Whether tokenizer.run is there and tokenizer_cache_check accepts it for
 * the present tokenizer.json. */
static bool run_file_current(void) {
    size_t n;
    unsigned char *bytes = read_bytes(run_path, &n);
    if (!bytes) return false;
    TokenTables tables;
    Error e;
    bool ok = tokenizer_cache_check(&tables, bytes, n, json_key(), run_path, &e) == 0;
    free(bytes);
    return ok;
}

/* The number of golden lines whose text t encodes to Hugging Face's ids. */
static int golden_lines_matched(Tokenizer *t, int *n_lines) {
    char *data = test_data("gpt2-style.jsonl", NULL);
    int matched = 0;
    *n_lines = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        Error e;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("gpt2-style.jsonl: %s", e.msg);
        const JsonValue *text = json_get(&doc.root, "text"), *ids = json_get(&doc.root, "ids");
        TokenIds got = {0};
        tokenizer_encode(t, text->string, text->len, ENCODE_ADDED_TOKENS, &got);
        bool same = got.n == ids->len;
        for (size_t i = 0; same && i < got.n; i++) same = got.ids[i] == ids->items[i].number.integer;
        matched += same;
        (*n_lines)++;
        token_ids_free(&got);
        json_free(&doc);
    }
    free(data);
    return matched;
}

/* Loads with the prepared tokenizer and checks every golden line. */
static void check_prepared_load(const char *when) {
    Error e;
    Tokenizer *t = tokenizer_load_prepared(json_path, &e);
    CHECK(t != NULL, "%s: loads (%s)", when, t ? "" : e.msg);
    if (!t) return;
    int n_lines, matched = golden_lines_matched(t, &n_lines);
    CHECK(n_lines == 307 && matched == n_lines, "%s: %d of %d golden lines give Hugging Face's ids", when, matched, n_lines);
    tokenizer_free(t);
    CHECK(run_file_current(), "%s: tokenizer.run is there and up to date", when);
}

/* The first load writes the file, the second maps it: an edit of a token's
 * bytes in the file shows in what that token decodes to. */
static void test_written_then_mapped(void) {
    unlink(run_path);
    check_prepared_load("first load");
    check_prepared_load("second load");

    size_t n;
    unsigned char *bytes = read_bytes(run_path, &n);
    TokenTables tables;
    Error e;
    CHECK(tokenizer_cache_check(&tables, bytes, n, json_key(), run_path, &e) == 0, "the file checks");
    int hello = 453;  /* "Hello", the golden ids of "Hello world" */
    size_t at = (size_t)(tables.bytes - (const char *)bytes) + tables.start[hello];
    CHECK(tables.start[hello + 1] - tables.start[hello] == 5 && memcmp(bytes + at, "Hello", 5) == 0,
          "token 453 is 'Hello' in the file's tables");
    memcpy(bytes + at, "HELLO", 5);
    write_bytes(run_path, bytes, n);
    Tokenizer *t = tokenizer_load_prepared(json_path, &e);
    size_t len;
    char *text = t ? tokenizer_decode(t, &hello, 1, &len) : NULL;
    CHECK(text && len == 5 && memcmp(text, "HELLO", 5) == 0, "token 453 decodes as the edited file says");
    free(text);
    tokenizer_free(t);

    /* The file's copy of the JSON (the vocabulary and merges null) is what
     * a load reads: broken there (the post-processor's single template
     * renamed, which a tokenizer refuses), the load falls back to
     * tokenizer.json, gives HF's ids with the template, and writes the file
     * again. */
    memcpy(bytes + at, "Hello", 5);
    char *rest = (char *)bytes + (tables.rest - (const char *)bytes);
    char *vocab = strstr(rest, "\"vocab\"");
    CHECK(vocab && strncmp(vocab, "\"vocab\": null", 13) == 0 && strstr(rest, "\"merges\": null") &&
              tables.rest_len < 6000,
          "the file holds the JSON without its vocabulary and merges (%zu bytes)", tables.rest_len);
    char *single = strstr(rest, "\"single\"");
    char *post = strstr(rest, "\"post_processor\"");
    CHECK(post && single, "the JSON has the post-processor's single template");
    if (post && single) memcpy(single, "\"singlE\"", 8);  /* no single template: refused, so made again */
    write_bytes(run_path, bytes, n);
    TokenIds ids = {0};
    t = tokenizer_load_prepared(json_path, &e);
    if (t) tokenizer_encode(t, "Hello world", 11, ENCODE_PROMPT, &ids);
    CHECK(ids.n == 4 && ids.ids[0] == 617 && ids.ids[1] == 453 && ids.ids[2] == 416 && ids.ids[3] == 618,
          "a broken copy of the JSON is made again from tokenizer.json: HF's ids with the template");
    token_ids_free(&ids);
    tokenizer_free(t);
    free(bytes);
    bytes = read_bytes(run_path, &n);
    CHECK(bytes && tokenizer_cache_check(&tables, bytes, n, json_key(), run_path, &e) == 0 &&
              memmem(tables.rest, tables.rest_len, "\"single\"", 8) && !memmem(tables.rest, tables.rest_len, "singlE", 6),
          "tokenizer.run was written again, with the template");
    free(bytes);
    unlink(run_path);
}

/* Without the prepared tokenizer nothing is written. */
static void test_not_prepared(void) {
    unlink(run_path);
    Error e;
    Tokenizer *t = tokenizer_load(json_path, &e);
    CHECK(t != NULL && access(run_path, F_OK) != 0, "tokenizer_load writes no tokenizer.run");
    tokenizer_free(t);
}

/* An edited tokenizer.json makes the file out of date: it is made again. */
static void test_out_of_date(void) {
    check_prepared_load("before the edit");
    uint64_t before = json_key();
    size_t n;
    unsigned char *text = read_bytes(json_path, &n);
    text = realloc(text, n + 1);
    text[n] = '\n';  /* still the same JSON, other bytes */
    write_bytes(json_path, text, n + 1);
    free(text);
    CHECK(json_key() != before, "another key after the edit");
    check_prepared_load("after the edit");
}

/* Field offsets of the header (tokenizer_cache.h), for the damage below. */
enum { H_VERSION = 8, H_FLAGS = 12, H_SIZE = 24, H_VOCAB_SIZE = 32, H_BPE_VOCAB_SIZE = 36, H_VOCAB_SLOTS = 48 };

typedef enum { CUT_SHORT, BAD_MAGIC, RESERVED, SIZE_FIELD, BPE_PAST_VOCAB, SLOTS_NOT_POWER, VOCAB_ID_PAST, VOCAB_FULL,
               START_FALLS, MERGED_NEGATIVE, BYTE_TOKEN_PAST, NOT_BYTE_LEVEL, REST_NOT_JSON, N_DAMAGE } Damage;

static const char *const DAMAGE_NAMES[N_DAMAGE] = {
    "cut short", "another magic", "a reserved byte set", "a wrong size field", "bpe_vocab_size past vocab_size",
    "a table size not a power of two", "a vocabulary id past the vocabulary", "a full vocabulary table",
    "falling token offsets", "a negative merged id", "a byte token past the vocabulary",
    "tables of another pipeline (not byte-level)", "a copy of the JSON that is not JSON"};

/* Damages a good file in bytes[0..*n) the named way. */
static void damage(unsigned char *bytes, size_t *n, Damage d, const TokenTables *tables) {
    VocabSlot *vocab = (VocabSlot *)(bytes + ((const unsigned char *)tables->vocab - bytes));
    Merge *merges = (Merge *)(bytes + ((const unsigned char *)tables->merges - bytes));
    uint32_t *start = (uint32_t *)(bytes + ((const unsigned char *)tables->start - bytes));
    int32_t v;
    switch (d) {
    case CUT_SHORT: *n -= 1; break;
    case BAD_MAGIC: bytes[0] ^= 1; break;
    case RESERVED: bytes[100] = 1; break;
    case SIZE_FIELD: bytes[H_SIZE] ^= 64; break;
    case BPE_PAST_VOCAB:
        memcpy(&v, bytes + H_VOCAB_SIZE, 4);
        v++;
        memcpy(bytes + H_BPE_VOCAB_SIZE, &v, 4);
        break;
    case SLOTS_NOT_POWER: bytes[H_VOCAB_SLOTS] ^= 3; break;
    case VOCAB_ID_PAST:
        for (size_t i = 0; i < tables->vocab_slots; i++)
            if (vocab[i].id >= 0) {
                vocab[i].id = tables->bpe_vocab_size;
                break;
            }
        break;
    case VOCAB_FULL:
        for (size_t i = 0; i < tables->vocab_slots; i++)
            if (vocab[i].id < 0) vocab[i].id = 0;
        break;
    case START_FALLS: start[2] = start[1] - 1; break;
    case MERGED_NEGATIVE:
        for (size_t i = 0; i < tables->merge_slots; i++)
            if (merges[i].pair != EMPTY_PAIR) {
                merges[i].merged = -5;
                break;
            }
        break;
    case BYTE_TOKEN_PAST: {
        int32_t past = tables->bpe_vocab_size;
        memcpy(bytes + 128 + 4 * 'a', &past, 4);  /* byte_token is the first table, right after the header */
        break;
    }
    case NOT_BYTE_LEVEL: bytes[H_FLAGS] = 0; break;
    case REST_NOT_JSON: bytes[(const unsigned char *)tables->rest - bytes] = '#'; break;
    case N_DAMAGE: break;
    }
}

/* Each damage is refused by the check (but for the last two, which only
 * the tokenizer can see), and a load makes the file again and gives HF's
 * ids. */
static void test_damaged(void) {
    check_prepared_load("an undamaged file");
    size_t good_n;
    unsigned char *good = read_bytes(run_path, &good_n);
    TokenTables tables;
    Error e;
    CHECK(tokenizer_cache_check(&tables, good, good_n, json_key(), run_path, &e) == 0, "the undamaged file checks");
    for (int d = 0; d < N_DAMAGE; d++) {
        size_t n = good_n;
        unsigned char *bytes = malloc(good_n);
        memcpy(bytes, good, good_n);
        /* tables points into good: the same offsets hold in the copy. */
        TokenTables in_copy = tables;
        in_copy.vocab = (const VocabSlot *)(bytes + ((const unsigned char *)tables.vocab - good));
        in_copy.merges = (const Merge *)(bytes + ((const unsigned char *)tables.merges - good));
        in_copy.start = (const uint32_t *)(bytes + ((const unsigned char *)tables.start - good));
        in_copy.rest = (const char *)(bytes + ((const unsigned char *)tables.rest - good));
        damage(bytes, &n, (Damage)d, &in_copy);
        TokenTables got;
        int rc = tokenizer_cache_check(&got, bytes, n, json_key(), "damaged.run", &e);
        if (d == NOT_BYTE_LEVEL || d == REST_NOT_JSON)
            CHECK(rc == 0, "%s: well-formed, so the check passes it (the load sees it)", DAMAGE_NAMES[d]);
        else
            CHECK(rc == -1 && strncmp(e.msg, "damaged.run: ", 13) == 0, "%s: refused (%d: %s)", DAMAGE_NAMES[d], rc,
                  rc ? e.msg : "");
        write_bytes(run_path, bytes, n);
        free(bytes);
        char what[96];
        snprintf(what, sizeof what, "after %s", DAMAGE_NAMES[d]);
        check_prepared_load(what);
    }
    free(good);
}

/* Another version's file is out of date (1), not damaged. */
static void test_other_version(void) {
    check_prepared_load("this version's file");
    size_t n;
    unsigned char *bytes = read_bytes(run_path, &n);
    uint32_t other = TOKENIZER_CACHE_VERSION + 1;
    memcpy(bytes + H_VERSION, &other, 4);
    TokenTables tables;
    Error e;
    CHECK(tokenizer_cache_check(&tables, bytes, n, json_key(), "old.run", &e) == 1, "another version: out of date");
    CHECK(tokenizer_cache_check(&tables, bytes, n, json_key() ^ 1, "old.run", &e) == 1, "another key: out of date");
    write_bytes(run_path, bytes, n);
    free(bytes);
    check_prepared_load("after another version's file");
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    const char *dir = test_scratch("tokenizer_cache");
    snprintf(json_path, sizeof json_path, "%s/tokenizer.json", dir);
    snprintf(run_path, sizeof run_path, "%s/tokenizer.run", dir);
    unsigned long n;
    char *json = test_data("gpt2-style-tokenizer.json", &n);
    write_bytes(json_path, json, n);
    free(json);
    test_written_then_mapped();
    test_not_prepared();
    test_damaged();
    test_other_version();
    test_out_of_date();
    return test_summary("test_tokenizer_cache");
}
