/* bench_tokenizer.c - times loading tokenizer.json and encoding a 1 MB text;
 * built and run by scripts/bench_tokenizer.sh.
 *
 *   bench_tokenizer TOKENIZER_JSON GOLDEN_JSONL SOURCE_FILE...
 *
 * The text is made deterministically from the golden file's texts (English,
 * Chinese, other scripts, emoji) and the given source files (C code), taken
 * in turns a line or paragraph at a time, until it is 1 MiB. Prints one line:
 * the load time, then the encoding speed of the first pass (every piece new
 * to the tokenizer's cache) and of a second pass over the same text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../json.h"
#include "../tokenizer.h"
#include "../util.h"

enum { TEXT_BYTES = 1 << 20 };

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static void append(Buffer *b, const char *s, size_t n) {
    if (b->len + n > b->cap) b->data = xrealloc(b->data, b->cap = 2 * (b->len + n), 1);
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* The texts of the golden file, one after another, each with a newline. */
static Buffer golden_texts(const char *path) {
    char *data;
    size_t len;
    Error e;
    if (read_file(path, &data, &len, &e) != 0) die("%s", e.msg);
    Buffer out = {0};
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        JsonDoc doc;
        if (json_parse(&doc, line, strlen(line), &e) != 0) die("%s: %s", path, e.msg);
        const JsonValue *text = json_get(&doc.root, "text");
        if (text && text->type == JSON_STRING) {
            append(&out, text->string, text->len);
            append(&out, "\n", 1);
        }
        json_free(&doc);
    }
    free(data);
    return out;
}

/* The next piece of b after *at (starting over at the end): up to and with
 * the next end_mark ("\n" for a golden text, "\n\n" for a paragraph). */
static const char *next_piece(const Buffer *b, size_t *at, const char *end_mark, size_t *n) {
    if (*at >= b->len) *at = 0;
    const char *start = b->data + *at, *stop = strstr(start, end_mark);
    *n = stop ? (size_t)(stop - start) + strlen(end_mark) : b->len - *at;
    *at += *n;
    return start;
}

int main(int argc, char **argv) {
    if (argc < 4) die_usage("usage: bench_tokenizer TOKENIZER_JSON GOLDEN_JSONL SOURCE_FILE...");
    Buffer golden = golden_texts(argv[2]), code = {0};
    for (int i = 3; i < argc; i++) {
        char *data;
        size_t len;
        Error e;
        if (read_file(argv[i], &data, &len, &e) != 0) die("%s", e.msg);
        append(&code, data, len);
        free(data);
    }
    append(&golden, "", 1);  /* NUL-terminate both for strstr */
    golden.len--;
    append(&code, "", 1);
    code.len--;

    /* Three golden texts, then a paragraph of code, in turns. */
    Buffer text = {0};
    size_t golden_at = 0, code_at = 0;
    while (text.len < TEXT_BYTES) {
        size_t n;
        for (int k = 0; k < 3; k++) {
            const char *piece = next_piece(&golden, &golden_at, "\n", &n);
            append(&text, piece, n);
        }
        const char *piece = next_piece(&code, &code_at, "\n\n", &n);
        append(&text, piece, n);
    }
    size_t len = TEXT_BYTES;
    while (((unsigned char)text.data[len] & 0xC0) == 0x80) len--;  /* end on a whole character */

    Error e;
    double t0 = now_seconds();
    Tokenizer *t = tokenizer_load(argv[1], &e);
    double load = now_seconds() - t0;
    if (!t) die("%s", e.msg);

    double seconds[2];
    size_t n_tokens = 0;
    for (int pass = 0; pass < 2; pass++) {
        TokenIds ids = {0};
        t0 = now_seconds();
        tokenizer_encode(t, text.data, len, ENCODE_ADDED_TOKENS, &ids);
        seconds[pass] = now_seconds() - t0;
        n_tokens = ids.n;
        token_ids_free(&ids);
    }
    printf("load_ms %.1f first_MB/s %.2f first_tok/s %.0f second_MB/s %.2f second_tok/s %.0f (%zu bytes, %zu tokens)\n",
           load * 1e3, len / seconds[0] / 1e6, n_tokens / seconds[0], len / seconds[1] / 1e6, n_tokens / seconds[1], len,
           n_tokens);
    tokenizer_free(t);
    free(golden.data);
    free(code.data);
    free(text.data);
    return 0;
}
