/* tokenizer_parts.h - what the parts of the tokenizer (tokenizer.c,
 * normalizer.c, pretokenizer.c, decoder.c) share, and nothing else uses:
 * reading tokenizer.json's sections, and a growable byte string. */
#ifndef TOKENIZER_PARTS_H
#define TOKENIZER_PARTS_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

/* Whether v is the string s. */
bool json_is_string(const JsonValue *v, const char *s);
/* Whether v is missing or null; missing, null or false; missing, null or "". */
bool json_is_null(const JsonValue *v);
bool json_is_false(const JsonValue *v);
bool json_is_empty_string(const JsonValue *v);
/* The "type" of a pipeline section, for messages: "BPE", "NFKC", ...,
 * "(missing)" or "(no type)". */
const char *section_type(const JsonValue *section);
/* The types of a Sequence's steps, for messages: "Sequence[Split, Digits]". */
const char *sequence_types(const JsonValue *steps, char out[128]);
/* Up to 40 bytes of s, with control characters as '?', for messages. */
const char *shown(const char *s, size_t n, char out[48]);

/* Bytes being built: text[0..len), room for cap. Start from {0}. */
typedef struct {
    char *text;
    size_t len, cap;
} Bytes;

void bytes_add(Bytes *b, const char *s, size_t n);
void bytes_free(Bytes *b);

#endif
