/* chat.h - a conversation with an instruction-tuned model: its messages,
 * written out by the checkpoint's chat template (as transformers'
 * apply_chat_template writes them) and tokenized, with the oldest turns
 * dropped when the conversation outgrows the context.
 *
 * Every turn renders the whole conversation again; the Sequence that runs it
 * keeps the KV cache of the tokens it begins with, so a turn computes only
 * its new tokens. */
#ifndef CHAT_H
#define CHAT_H

#include <stdbool.h>

#include "tokenizer.h"
#include "util.h"

typedef struct {
    char *role;                /* "system", "user" or "assistant" */
    char *content;
} ChatMessage;

typedef struct {
    Tokenizer *tokenizer;
    char *system;              /* the system message asked for, or NULL: the template's default */
    int thinking;              /* enable_thinking: 1 or 0, or -1 to leave the template's default */
    ChatMessage *messages;     /* [n_messages] the conversation, the system message not included */
    int n_messages, cap;
} Chat;

/* A conversation with checkpoint MODEL (its tokenizer_config.json has the
 * template) through tokenizer t. */
int chat_init(Chat *c, const char *model, Tokenizer *t, const char *system, int thinking, Error *e);
void chat_free(Chat *c);

void chat_add(Chat *c, const char *role, const char *content);
void chat_remove_last(Chat *c);
void chat_reset(Chat *c);

/* The tokens of the conversation followed by the start of the assistant's
 * reply. When they would leave less than an eighth of `capacity` for the
 * reply, the oldest messages are dropped (the system message stays) until
 * they fit; *dropped says how many. An error when even the last message
 * alone does not fit. */
int chat_prompt(Chat *c, int capacity, TokenIds *ids, int *dropped, Error *e);

#endif
