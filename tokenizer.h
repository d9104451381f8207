/* tokenizer.h - BPE tokenizers as Hugging Face's tokenizers library runs
 * them, giving exactly its ids for the same tokenizer.json: byte-level BPE
 * (Qwen2, Qwen3, Llama 3, GPT-2, SmolLM2) and SentencePiece-style BPE with
 * byte fallback (Llama 2, TinyLlama, Mistral 7B, Gemma 3).
 *
 * Encoding runs Hugging Face's pipeline in its order, each part built from
 * what tokenizer.json says, never from a model's name:
 *   1. added tokens (<|im_end|>, <start_of_turn>, ...) are split out of the
 *      raw text, longest match first (only when the mode says
 *      ENCODE_ADDED_TOKENS); each stretch between them goes on alone;
 *   2. the normalizer (normalizer.h): NFC, Replace, Prepend;
 *   3. the pre-tokenizer (pretokenizer.h) cuts it into pieces: Split by a
 *      string or a regex, Metaspace, ByteLevel;
 *   4. BPE turns each piece into tokens, lowest merge rank first, starting
 *      from its bytes (byte-level) or its characters, a character missing
 *      from the vocabulary becoming its bytes' <0xNN> tokens (byte_fallback)
 *      or the unk token; with ignore_merges (Llama 3), a piece that is a
 *      vocabulary token is that one token even when no merges make it;
 *   5. the post-processor (only when the mode says ENCODE_ADD_SPECIAL) puts
 *      its special tokens around the ids: TemplateProcessing's BOS and EOS
 *      (Llama 3's <|begin_of_text|>, Gemma's <bos>); Qwen's adds nothing.
 * A tokenizer.json with anything else in it (not BPE, another normalizer,
 * pre-tokenizer or regex, another post-processor, ...) is refused at load,
 * with a message that names it, rather than tokenized wrongly.
 *
 * Decoding is the tokenizers library's decode(ids, skip_special_tokens=
 * False): special tokens are kept. A byte-level tokenizer's ids become
 * bytes read as UTF-8 the lossy way (each ill-formed sequence becomes
 * U+FFFD); otherwise the decoder's steps (decoder.h) run on the tokens as
 * spelled. Nothing is cleaned up: Python's transformers by default (and
 * Llama 3's tokenizer_config.json asks for it) also applies
 * clean_up_tokenization_spaces, which removes the space before "." "," "!"
 * "?" and before the contractions "n't" "'m" "'s" "'ve" "'re", and turns
 * " ' " into "'", so that its text is no longer the exact text the ids
 * stand for (" !" would decode to "!"). */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "pretokenizer.h"
#include "util.h"

typedef struct Tokenizer Tokenizer;

/* Loads a tokenizer.json. On failure returns NULL with one line in e that
 * names the file and what is wrong with it. */
Tokenizer *tokenizer_load(const char *path, Error *e);

/* As tokenizer_load, with the prepared tokenizer (tokenizer_cache.h): the
 * vocabulary's tables are mapped from it when it is up to date, else built
 * from the JSON and written to it for the next start. The same tokenizer
 * either way. */
Tokenizer *tokenizer_load_prepared(const char *path, Error *e);
void tokenizer_free(Tokenizer *t);

/* Ids run from 0 to tokenizer_vocab_size() - 1 (the largest id + 1); an id
 * in that range may still have no token (a gap in the numbering). */
int tokenizer_vocab_size(const Tokenizer *t);

/* Fits t to a model with `vocab` embeddings, so that no text encodes to an
 * id the model cannot run: the added tokens past it are no longer matched
 * in texts (Gemma 3's <image_soft_token>, id 262144, with the 1B and 270M
 * checkpoints' vocab_size of 262144: transformers would give the id and
 * fail in the embedding) and tokenizer_vocab_size becomes vocab. Fails when
 * more than added tokens lie past it: the BPE vocabulary, the unk token or
 * the post-processor's ids. */
int tokenizer_fit(Tokenizer *t, int vocab, Error *e);

/* The id of the token whose text is exactly content[0..len) (an added token
 * such as "<|im_end|>", or a vocabulary token's bytes), or -1. */
int tokenizer_find(const Tokenizer *t, const char *content, size_t len);

/* The bytes of token id (an added token's content, or the raw bytes a
 * vocabulary token stands for, which may be part of a UTF-8 character: a
 * SentencePiece-style token as it reads mid-text, "▁the" as " the" and
 * <0x41> as "A"), or NULL when no token has that id. Valid while t lives;
 * not NUL-terminated. */
const char *tokenizer_token(const Tokenizer *t, int id, size_t *len);

/* Whether token id is an added token marked "special" in tokenizer.json
 * (<|im_end|>, <|python_tag|>; not Qwen's <tool_call> or <think>). */
bool tokenizer_is_special(const Tokenizer *t, int id);

/* The token as tokenizer.json spells it, as Hugging Face's
 * convert_ids_to_tokens shows it: a vocabulary token in the byte-level
 * alphabet ("Ġ" for a space, "Ċ" for a newline) or SentencePiece's ("▁the",
 * "<0x41>"), an added token as its content. A fresh string for the caller
 * to free, or NULL for no token. */
char *tokenizer_spelling(const Tokenizer *t, int id);

/* A growable list of token ids. Start from {0}; free with token_ids_free. */
typedef struct {
    int *ids;
    size_t n, cap;
} TokenIds;

void token_ids_push(TokenIds *list, int id);
void token_ids_free(TokenIds *list);

/* How tokenizer_encode reads a text: ENCODE_PLAIN, or the flags
 * ENCODE_ADDED_TOKENS and ENCODE_ADD_SPECIAL, alone or together. */
typedef enum {
    ENCODE_PLAIN = 0,         /* all of the text is text: a typed "<|im_end|>" is spelled out */
    ENCODE_ADDED_TOKENS = 1,  /* added tokens in the text become their ids (prompts, chat templates) */
    ENCODE_ADD_SPECIAL = 2,   /* the post-processor's special tokens go around the text's ids
                                 (Hugging Face's add_special_tokens=True): Llama 3's BOS first */
    /* Hugging Face's encode(text) with its defaults: what gen and tok do with
     * a prompt. A rendered chat template spells out its BOS itself, so it is
     * encoded with ENCODE_ADDED_TOKENS alone, as transformers does. */
    ENCODE_PROMPT = ENCODE_ADDED_TOKENS | ENCODE_ADD_SPECIAL,
} EncodeMode;

/* Appends the ids of text[0..len) (any bytes; NULs are text too) to out.
 * Ill-formed UTF-8 is read as U+FFFD, one per maximal subpart; returns how
 * many such replacements were made, so that the caller can warn. Not
 * thread-safe: t keeps a cache of the pieces it has seen. */
size_t tokenizer_encode(Tokenizer *t, const char *text, size_t len, EncodeMode mode, TokenIds *out);

/* The special tokens ENCODE_ADD_SPECIAL puts before and after a text's ids
 * (*n of them, often none), as tokenizer.json's post-processor
 * (TemplateProcessing) says: for Llama 3 the prefix is the one id of
 * <|begin_of_text|>, put even before a text that starts with that token,
 * and even for an empty text; for Qwen both are empty. Valid while t lives. */
const int *tokenizer_special_prefix(const Tokenizer *t, size_t *n);
const int *tokenizer_special_suffix(const Tokenizer *t, size_t *n);

/* The pre-tokenizer t runs (pretokenizer.h), for inspection. */
const PreTokenizer *tokenizer_pre_tokenizer(const Tokenizer *t);

/* The text of ids[0..n): a fresh NUL-terminated string of *len bytes. An id
 * with no token gives no text, as Hugging Face's decode skips it (the model's
 * vocabulary can be larger than the tokenizer's). */
char *tokenizer_decode(const Tokenizer *t, const int *ids, size_t n, size_t *len);

/* Decoding one id at a time, for generation: the text is given out only in
 * whole UTF-8 characters, the start of a character (its first bytes, or
 * <0xNN> tokens) being held back until its other bytes come. All the pieces
 * given out, then the flush, add up to exactly tokenizer_decode() of all the
 * ids; with a ByteFallback decoder, but for a run of <0xNN> tokens that is
 * valid UTF-8 and no longer once more join it (decode has one U+FFFD per
 * byte of such a run; the stream has given out its first characters). */
typedef struct {
    const Tokenizer *tokenizer;
    char pending[4];     /* byte-level: the start of a character still waiting for bytes */
    size_t n_pending;
    TokenIds window;     /* with a decoder's steps: the ids decoded again at each push */
    size_t n_context;    /* the first of them, already given out, */
    char *prefix;        /* whose text is prefix[0..prefix_len) */
    size_t prefix_len;
    char *out;           /* the text the last call gave out */
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
