/* normalizer.h - tokenizer.json's "normalizer": the edits made to a text
 * (each stretch between added tokens, on its own) before it is split into
 * pieces, as Hugging Face's tokenizers makes them, in order:
 *   NFC       Unicode's canonical composition (Unicode 9.0's data, as
 *             Hugging Face's; see scripts/gen_unicode.py);
 *   Replace   every occurrence of a string by another, left to right
 *             (SentencePiece-style files: ' ' becomes '▁');
 *   Prepend   a string put before the text, unless the text is empty
 *             (Llama 2's '▁');
 *   Sequence  of these.
 * Anything else (NFKC, Lowercase, a Replace by regex, ...) is refused at
 * load with a message that names it. */
#ifndef NORMALIZER_H
#define NORMALIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

typedef enum { NORMALIZE_NFC, NORMALIZE_REPLACE, NORMALIZE_PREPEND } NormalizeKind;

typedef struct {
    NormalizeKind kind;
    const char *pattern;  /* Replace: what is replaced ([pattern_len] bytes, not empty) */
    size_t pattern_len;
    const char *content;  /* Replace: what replaces it; Prepend: what goes first */
    size_t content_len;
} NormalizeStep;

/* The steps; none for a tokenizer.json without a normalizer. The strings
 * point into the JSON document read, which must outlive it: see
 * normalizer_own. */
typedef struct {
    NormalizeStep *steps;
    size_t n;
    char *strings;  /* the steps' strings, once owned */
} Normalizer;

/* Reads tokenizer.json's "normalizer" (missing or null: none). On failure
 * returns -1 with one line in e. */
int normalizer_read(Normalizer *nz, const JsonValue *section, Error *e);
/* Copies the strings the steps point to, so the document can go. */
void normalizer_own(Normalizer *nz);
void normalizer_free(Normalizer *nz);

/* The normalized form of valid UTF-8 s[0..n): NULL when it is s itself,
 * else a fresh NUL-terminated string of *out_len bytes to free. */
char *normalizer_apply(const Normalizer *nz, const char *s, size_t n, size_t *out_len);

#endif
