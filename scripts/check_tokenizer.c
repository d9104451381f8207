/* check_tokenizer.c - checks a tokenizer.json against a golden file made by
 * Hugging Face's tokenizers library; built and run by
 * scripts/check_llama3_tokenizer.sh.
 *
 *   check_tokenizer TOKENIZER_JSON GOLDEN_JSONL
 *
 * Each line of the golden file is {"text": ..., "ids": [...], "decoded": ...},
 * with "ids_with_special" too when the tokenizer's post-processor adds
 * special tokens. For every line: the text encodes to "ids" (added tokens
 * read as such, nothing added: add_special_tokens=False), and to
 * "ids_with_special" with the post-processor's tokens (add_special_tokens=
 * True); "ids" decode to "decoded". Prints each failing line, then one
 * summary line; the exit status is 0 only when every check passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../json.h"
#include "../tokenizer.h"
#include "../util.h"

/* Whether the ids encoded equal the JSON array want. */
static bool same_ids(const TokenIds *got, const JsonValue *want) {
    if (!want || want->type != JSON_ARRAY || got->n != want->len) return false;
    for (size_t i = 0; i < got->n; i++)
        if (!want->items[i].number.is_integer || want->items[i].number.integer != got->ids[i]) return false;
    return true;
}

/* The golden ids as an int array, for decoding. */
static int *ids_of(const JsonValue *ids) {
    int *out = xmalloc((ids->len + 1) * sizeof *out);
    for (size_t i = 0; i < ids->len; i++) out[i] = (int)ids->items[i].number.integer;
    return out;
}

int main(int argc, char **argv) {
    if (argc != 3) die_usage("usage: check_tokenizer TOKENIZER_JSON GOLDEN_JSONL");
    Error e;
    double t0 = now_seconds();
    Tokenizer *t = tokenizer_load(argv[1], &e);
    if (!t) die("%s", e.msg);
    double load_seconds = now_seconds() - t0;
    char *data;
    size_t len;
    if (read_file(argv[2], &data, &len, &e) != 0) die("%s", e.msg);

    int n_lines = 0, n_failed = 0, n_checks = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        n_lines++;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("%s line %d: %s", argv[2], n_lines, e.msg);
        const JsonValue *text = json_get(&doc.root, "text"), *ids = json_get(&doc.root, "ids"),
                        *with_special = json_get(&doc.root, "ids_with_special"),
                        *decoded = json_get(&doc.root, "decoded");
        if (!text || text->type != JSON_STRING || !ids || ids->type != JSON_ARRAY || !decoded ||
            decoded->type != JSON_STRING)
            die("%s line %d: no \"text\", \"ids\" or \"decoded\"", argv[2], n_lines);
        const char *failed = NULL;

        TokenIds got = {0};
        tokenizer_encode(t, text->string, text->len, ENCODE_ADDED_TOKENS, &got);
        n_checks++;
        if (!same_ids(&got, ids)) failed = "ids";
        if (with_special) {
            got.n = 0;
            tokenizer_encode(t, text->string, text->len, ENCODE_PROMPT, &got);
            n_checks++;
            if (!same_ids(&got, with_special)) failed = "ids_with_special";
        }
        int *want = ids_of(ids);
        size_t back_len;
        char *back = tokenizer_decode(t, want, ids->len, &back_len);
        n_checks++;
        if (back_len != decoded->len || memcmp(back, decoded->string, back_len) != 0) failed = "decoded";
        if (failed) {
            n_failed++;
            printf("line %d: %s differ: %.100s\n", n_lines, failed, line);
        }
        free(back);
        free(want);
        token_ids_free(&got);
        json_free(&doc);
    }
    printf("%s: %d of %d lines pass (%d checks), load %.0f ms\n", argv[2], n_lines - n_failed, n_lines, n_checks,
           load_seconds * 1e3);
    free(data);
    tokenizer_free(t);
    return n_failed == 0 && n_lines > 0 ? 0 : 1;
}
