/* tokenizer.h - Qwen2's byte-level BPE tokenizer, giving exactly the ids of
 * Hugging Face's tokenizers library for the same tokenizer.json.
 *
 * Encoding runs Hugging Face's pipeline in its order:
 *   1. added tokens (<|im_end|>, ...) are split out of the raw text, longest
 *      match first (only in ENCODE_ADDED_TOKENS mode);
 *   2. the text between them is NFC-normalized (with Unicode 9.0's data, as
 *      Hugging Face does: see scripts/gen_unicode.py);
 *   3. it is split into pieces by the Qwen2 pre-tokenizer regex (letters and
 *      numbers as Unicode 16.0 has them, as Hugging Face's regex engine);
 *   4. each piece's bytes are merged by BPE, lowest merge rank first.
 * Decoding maps ids back to bytes and reads them as UTF-8 the lossy way:
 * each ill-formed sequence becomes U+FFFD, as Hugging Face's decode does.
 *
 * Any tokenizer.json whose model or pipeline differs from this one (not BPE,
 * another normalizer, pre-tokenizer or regex, ...) is refused at load rather
 * than tokenized wrongly. */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef struct Tokenizer Tokenizer;

/* Loads a tokenizer.json. On failure returns NULL with one line in e that
 * names the file and what is wrong with it. */
Tokenizer *tokenizer_load(const char *path, Error *e);
void tokenizer_free(Tokenizer *t);

/* Ids run from 0 to tokenizer_vocab_size() - 1 (the largest id + 1); an id
 * in that range may still have no token (a gap in the numbering). */
int tokenizer_vocab_size(const Tokenizer *t);

/* The id of the token whose text is exactly content[0..len) (an added token
 * such as "<|im_end|>", or a vocabulary token's bytes), or -1. */
int tokenizer_find(const Tokenizer *t, const char *content, size_t len);

/* The bytes of token id (an added token's content, or the raw bytes a
 * vocabulary token stands for, which may be part of a UTF-8 character), or
 * NULL when no token has that id. Valid while t lives; not NUL-terminated. */
const char *tokenizer_token(const Tokenizer *t, int id, size_t *len);

/* The token as tokenizer.json spells it, as Hugging Face's
 * convert_ids_to_tokens shows it: a vocabulary token in the byte-level
 * alphabet ("Ġ" for a space, "Ċ" for a newline), an added token as its
 * content. A fresh string for the caller to free, or NULL for no token. */
char *tokenizer_spelling(const Tokenizer *t, int id);

/* A growable list of token ids. Start from {0}; free with token_ids_free. */
typedef struct {
    int *ids;
    size_t n, cap;
} TokenIds;

void token_ids_push(TokenIds *list, int id);
void token_ids_free(TokenIds *list);

typedef enum {
    ENCODE_ADDED_TOKENS,  /* added tokens in the text become their ids (prompts, templates) */
    ENCODE_PLAIN,         /* all of the text is text: a typed "<|im_end|>" is spelled out */
} EncodeMode;

/* Appends the ids of text[0..len) (any bytes; NULs are text too) to out.
 * Ill-formed UTF-8 is read as U+FFFD, one per maximal subpart; returns how
 * many such replacements were made, so that the caller can warn. Not
 * thread-safe: t keeps a cache of the pieces it has seen. */
size_t tokenizer_encode(Tokenizer *t, const char *text, size_t len, EncodeMode mode, TokenIds *out);

/* The pre-tokenizer alone: the end of the piece of the Qwen2 regex that
 * starts at text[start], in valid UTF-8 text[0..len) (NFC already). Pieces
 * are encoded separately, so no token crosses from one into the next. */
size_t tokenizer_piece_end(const char *text, size_t len, size_t start);

/* The text of ids[0..n): a fresh NUL-terminated string of *len bytes. An id
 * with no token gives no text, as Hugging Face's decode skips it (the model's
 * vocabulary can be larger than the tokenizer's). */
char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n, size_t *len);

/* Decoding one id at a time, for generation: the text is given out only in
 * whole UTF-8 characters, the start of a character being held back until its
 * other bytes come. All the pieces given out, then the flush, add up to
 * exactly tokenizer_decode() of all the ids. */
typedef struct {
    const Tokenizer *tokenizer;
    char pending[4];  /* the start of a character still waiting for bytes */
    size_t n_pending;
    char *out;        /* the text the last call gave out */
    size_t out_cap;
} DecodeStream;

void decode_stream_init(DecodeStream *d, const Tokenizer *t);
/* The text that id completes (*len bytes, possibly none, and none for an id
 * with no token), valid until the next call. */
const char *decode_stream_push(DecodeStream *d, int id, size_t *len);
/* The end of the text: U+FFFD for a character left incomplete, or nothing. */
const char *decode_stream_flush(DecodeStream *d, size_t *len);
void decode_stream_free(DecodeStream *d);

#endif
