/* decoder.h - tokenizer.json's "decoder": how the tokens of a list of ids
 * (each spelled as tokenizer.json spells it) become text, as Hugging Face's
 * tokenizers does it. Each step turns the list of strings into another:
 *   Replace       every occurrence of a string by another, in each token
 *                 (SentencePiece-style files: '▁' becomes ' ');
 *   ByteFallback  each run of <0xNN> tokens becomes the text of its bytes
 *                 when they are valid UTF-8, else one U+FFFD per byte;
 *   Fuse          all the tokens become one;
 *   Strip         up to `start` leading and `stop` trailing `content`
 *                 characters are cut from each token (after Fuse: from the
 *                 text; Llama 2's first space);
 *   Metaspace     the replacement ('▁') becomes a space, and is dropped
 *                 from the first token unless prepend_scheme is "never";
 *   Sequence      of these;
 * and then the strings are joined. ByteLevel (GPT-2's byte-level alphabet
 * back to bytes) is a decoder on its own, which tokenizer.c runs itself.
 * Anything else is refused at load with a message that names it. */
#ifndef DECODER_H
#define DECODER_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

typedef enum { DECODE_REPLACE, DECODE_BYTE_FALLBACK, DECODE_FUSE, DECODE_STRIP, DECODE_METASPACE } DecodeKind;

typedef struct {
    DecodeKind kind;
    const char *pattern;  /* Replace: what is replaced [pattern_len]; Metaspace: the replacement */
    size_t pattern_len;
    const char *content;  /* Replace: what replaces it; Strip: the character cut [content_len] */
    size_t content_len;
    size_t start, stop;   /* Strip: how many characters at most, at each end */
    bool drop_first;      /* Metaspace: drop the replacement from the first token */
} DecodeStep;

/* The steps; byte_level for the ByteLevel decoder (then there are none).
 * The strings point into the JSON document until decoder_own copies them. */
typedef struct {
    DecodeStep *steps;
    size_t n;
    bool byte_level;
    char *strings;
} Decoder;

/* Reads tokenizer.json's "decoder". On failure returns -1 with one line in e. */
int decoder_read(Decoder *d, const JsonValue *section, Error *e);
void decoder_own(Decoder *d);
void decoder_free(Decoder *d);

/* The text of the n tokens tokens[i][0..lens[i]) (not for ByteLevel): a
 * fresh NUL-terminated string of *len bytes. */
char *decoder_run(const Decoder *d, const char *const *tokens, const size_t *lens, size_t n, size_t *len);

/* What one token stands for in the middle of a text: its text with the
 * steps that concern a text's start or a run of tokens left out (Strip,
 * Metaspace's first token), and a <0xNN> token as its one byte, which may
 * be part of a UTF-8 character. A fresh string of *len bytes. */
char *decoder_piece(const Decoder *d, const char *token, size_t n, size_t *len);

#endif
