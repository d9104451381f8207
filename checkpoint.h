/* checkpoint.h - a checkpoint loaded for a command of the command line:
 * the model and its tokenizer, checked together with generation_config.json
 * so that every command refuses a broken folder (download.sh and make chat
 * trust `run info` to check one), with a progress line while a load is
 * slow and a warning for each note the load leaves. Like main.c, it ends
 * the process on an error with one line (die); library code never does. */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "net.h"
#include "tokenizer.h"

/* What a command wants of tokenizer.json: nothing (info: parsing it takes
 * longer than all the rest), the tokenizer when the file is there (the
 * commands that also run token ids: fwd, bench), or the tokenizer. */
typedef enum { TOKENIZER_UNREAD, TOKENIZER_IF_PRESENT, TOKENIZER_NEEDED } TokenizerUse;

/* Loads checkpoint PATH: the model (its weights, or with `weights` false
 * only its headers, as info reads it) and, as `use` says, its tokenizer,
 * checked against the model (NULL when not read). */
Tokenizer *checkpoint_load(Model *m, const char *path, const ModelOptions *opt, TokenizerUse use, bool weights);

/* The tokenizer of checkpoint PATH alone (tok and detok read nothing else),
 * with its prepared tables unless `prepared` is false (--no-prepared). */
Tokenizer *checkpoint_tokenizer(const char *path, bool prepared);

/* Refuses token ids outside the model's vocabulary. */
void checkpoint_check_tokens(const Model *m, const int *ids, size_t n);

/* What to do about input too long for the context, into buf: `shorten`
 * (what to cut), or a larger -c while the model allows one. */
const char *context_advice(char *buf, size_t size, const Model *m, const char *shorten);

#endif
