/* pretokenizer.h - tokenizer.json's "pre_tokenizer": how a normalized text
 * is cut into pieces, which BPE then encodes each on its own (no token
 * crosses from one piece into the next), as Hugging Face's tokenizers cuts
 * them. Its steps, in order:
 *   Split      on a string, or on one of the regexes below, keeping the
 *              matches as its "behavior" says (Removed, Isolated,
 *              MergedWithPrevious, MergedWithNext, Contiguous), or the
 *              stretches between them with "invert";
 *   Metaspace  spaces become the replacement ('▁'), which is put first
 *              too when prepend_scheme says so ("always"; "first": only
 *              for the piece that starts the text; "never"), then, with
 *              "split", the text is cut before each replacement;
 *   ByteLevel  with its regex (use_regex), a Split by GPT-2's; it also
 *              says that tokens are spelled in the byte-level alphabet;
 *   Sequence   of these.
 * Anything else (Digits, Whitespace, another regex, ByteLevel's
 * add_prefix_space, ...) is refused at load with a message that names it. */
#ifndef PRETOKENIZER_H
#define PRETOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"

/* The regexes a Split may name, implemented by hand (pretokenizer.c):
 *   SPLIT_QWEN2   Qwen2 and Qwen3: letters after at most one other
 *                 character, numbers one digit at a time, contractions in
 *                 any case, white space runs that keep their last space for
 *                 the word after them, newlines on their own;
 *   SPLIT_LLAMA3  the same with numbers in runs of 1 to 3 digits;
 *   SPLIT_GPT2    ByteLevel's own regex (use_regex=true, e.g. GPT-2 and
 *                 SmolLM2): letters, numbers and punctuation each after at
 *                 most one space, lowercase contractions only. */
typedef enum { SPLIT_QWEN2, SPLIT_LLAMA3, SPLIT_GPT2 } SplitPattern;

/* The regex alone: the end of its match that starts at text[start], in
 * valid UTF-8 text[0..len). The regexes match everywhere, so their matches
 * cover the whole text. */
size_t split_pattern_end(SplitPattern p, const char *text, size_t len, size_t start);

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_WITH_PREVIOUS, SPLIT_MERGED_WITH_NEXT, SPLIT_CONTIGUOUS } SplitBehavior;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } PrependScheme;
typedef enum { PRETOKENIZE_SPLIT, PRETOKENIZE_METASPACE } PreTokenizeKind;

typedef struct {
    PreTokenizeKind kind;
    /* Split: on the string [len] when not NULL, else on the regex */
    const char *string;
    size_t string_len;
    SplitPattern regex;
    SplitBehavior behavior;
    bool invert;
    /* Metaspace: the replacement [len] of a space */
    const char *replacement;
    size_t replacement_len;
    PrependScheme prepend;
    bool split;
} PreTokenizeStep;

/* The steps (none: the text is one piece). The strings point into the JSON
 * document read until pretokenizer_own copies them. */
typedef struct {
    PreTokenizeStep *steps;
    size_t n;
    bool byte_level;  /* a ByteLevel step: tokens are spelled in the byte-level alphabet */
    char *strings;
} PreTokenizer;

/* Reads tokenizer.json's "pre_tokenizer" (missing or null: none). On
 * failure returns -1 with one line in e. */
int pretokenizer_read(PreTokenizer *p, const JsonValue *section, Error *e);
void pretokenizer_own(PreTokenizer *p);
void pretokenizer_free(PreTokenizer *p);

/* Cuts valid UTF-8 s[0..n) into pieces and calls emit on each non-empty one
 * in order. at_start: s begins the text given to the tokenizer (Metaspace's
 * "first" scheme prepends only there). */
typedef void PieceFn(void *ctx, const char *piece, size_t len);
void pretokenize(const PreTokenizer *p, const char *s, size_t n, bool at_start, PieceFn *emit, void *ctx);

#endif
