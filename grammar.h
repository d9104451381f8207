/* grammar.h - constrained decoding: a grammar says which texts may be
 * generated, and at each step the token mask says which tokens continue one.
 *
 * Grammars are written in llama.cpp's GBNF, so that existing files work:
 *
 *   root ::= "yes" | "no" ws          # rules, alternation, literals, comments
 *   ws   ::= [ \t\n]*                 # classes: ranges, ^ negation, escapes
 *   item ::= ("a" | [^"\\]){2,5} x? y+ .   # grouping, * + ? {m} {m,} {m,n}, . any
 *
 * Literals and classes are Unicode: each is compiled to the bytes of its
 * UTF-8 form, and the parse runs byte by byte, so a token that ends inside a
 * character is judged by the bytes it has (tokens are bytes too).
 * schema.h turns a JSON Schema into such a grammar.
 *
 * A parse in progress is a GrammarState, a small integer: copying it clones
 * the parse, grammar_start() resets it. States are interned in the Grammar
 * (the set of parse stacks each stands for is kept once), which also caches
 * each state's transitions and token mask; so one Grammar serves one thread
 * at a time (a server gives each request its own, which compiles in
 * microseconds). The GrammarVocab, the token bytes in a trie, is built once
 * per tokenizer and read-only, shared by all.
 *
 * A state's first mask is a walk of the trie, made cheap where most tokens
 * are allowed (inside a JSON string): the vocabulary keeps, for big subtrees
 * and for runs of small siblings whose bytes are well-formed UTF-8, which
 * bytes begin their characters and how many characters their longest path
 * holds; the grammar keeps, per state, where each whole character leads
 * (grouped by the state it reaches). A subtree is then judged from the
 * states its characters can lead to, level by level, without visiting it:
 * all of its tokens are allowed when no character is refused before the
 * levels run out or close on themselves, only those of at most k characters
 * when one state at level k refuses them all (a maxLength), and otherwise
 * the walk goes in. The masks are exactly those of a per-token check
 * (tests/test_grammar.c compares them with grammar_advance over every
 * token). */
#ifndef GRAMMAR_H
#define GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"
#include "util.h"

/* Bounds on untrusted grammars: the text, the nesting of groups, repetition
 * counts, the compiled size; and, while parsing, the depth of the parse
 * stack and the number of parses alive at once (an ambiguous grammar). */
enum {
    GRAMMAR_MAX_TEXT = 1 << 20,
    GRAMMAR_MAX_NESTING = 64,
    GRAMMAR_MAX_REPEAT = 1000,
    GRAMMAR_MAX_ELEMENTS = 1 << 20,
    GRAMMAR_MAX_DEPTH = 2048,
    GRAMMAR_MAX_STACKS = 2048,
};

typedef struct Grammar Grammar;
typedef int GrammarState;  /* >= 0; -1 stands for "no parse" (rejected) */

/* Compiles GBNF text[0..len) whose start rule is `root`. On a bad grammar
 * returns NULL with one line in e, e.g. "line 3, column 9: expected '::='",
 * "undefined rule 'value'", "rule 'expr' is left-recursive". */
Grammar *grammar_new(const char *text, size_t len, Error *e);
void grammar_free(Grammar *g);

/* The state before any byte. */
GrammarState grammar_start(Grammar *g);

/* The state after bytes[0..n) from state s, or -1 when they do not continue
 * any parse (or the parse grew past the bounds: see grammar_error). */
GrammarState grammar_advance(Grammar *g, GrammarState s, const char *bytes, size_t n);

/* Whether the text read to reach s is a complete sentence of the grammar. */
bool grammar_complete(const Grammar *g, GrammarState s);

/* Whether no byte can follow s (complete and nothing more allowed). */
bool grammar_finished(Grammar *g, GrammarState s);

/* Non-NULL once the parse has outgrown a bound (GRAMMAR_MAX_DEPTH,
 * GRAMMAR_MAX_STACKS, memory for states): the message says which. Every
 * later call then rejects. */
const char *grammar_error(const Grammar *g);

/* Whether the whole of text[0..n) is a sentence of the grammar. */
bool grammar_matches(Grammar *g, const char *text, size_t n);

/* ---- tokens ---- */

typedef struct GrammarVocab GrammarVocab;

/* The vocabulary of t as the mask sees it: every token by its bytes, except
 * the added tokens marked special (<|im_start|>, <|python_tag|>), which no
 * grammar allows (they would read as their text inside a JSON string), and
 * the end tokens end_ids[0..n_end), which are allowed exactly where the
 * parse is complete. Other added tokens (Qwen's <tool_call>, <think>) are
 * allowed where their text is.
 * vocab_size is the model's (masks have that many bits; ids past the
 * tokenizer's are never allowed). */
GrammarVocab *grammar_vocab_new(const Tokenizer *t, int vocab_size, const int *end_ids, int n_end);
void grammar_vocab_free(GrammarVocab *v);

/* Words of 64 bits a mask over v takes. */
size_t grammar_mask_words(const GrammarVocab *v);

/* The tokens allowed after state s: bit id of mask (mask[id / 64] >> (id % 64)
 * & 1) is set when the token's bytes continue a parse, or it is an end token
 * and s is complete. Masks are cached per state, so a state seen before
 * costs a copy. Returns how many tokens are allowed (0 also when the grammar
 * failed: see grammar_error). */
size_t grammar_fill_mask(Grammar *g, const GrammarVocab *v, GrammarState s, uint64_t *mask);

/* The state after token id from s: -1 when the mask would not allow it. An
 * end token leaves s as it is. */
GrammarState grammar_accept_token(Grammar *g, const GrammarVocab *v, GrammarState s, int id);

/* Whether id is one of v's end tokens. */
bool grammar_is_end_token(const GrammarVocab *v, int id);

#endif
