/* chat.h - conversations with an instruction-tuned model.
 *
 * A ChatTemplate is the checkpoint's own chat template (Jinja text, from
 * chat_template.jinja or tokenizer_config.json; or from a file the user
 * gives, --chat-template-file) with the special tokens it may refer to; rendering a list of messages gives exactly the text
 * transformers' apply_chat_template(..., tokenize=False) gives. The server
 * renders its requests' messages with it.
 *
 * A Chat is the command line's conversation: its messages, rendered and
 * tokenized as a whole every turn, with the oldest turns dropped when it
 * outgrows the context (the last turn alone may fill it). The Sequence that
 * runs it (session.c) keeps the KV cache of the tokens a turn begins with,
 * so a turn computes only its new tokens. */
#ifndef CHAT_H
#define CHAT_H

#include <stdbool.h>

#include "json.h"
#include "template.h"
#include "tokenizer.h"
#include "util.h"

typedef struct {
    Template *template;
    char *source;              /* the file the template came from, for messages */
    char *bos_token;           /* tokenizer_config.json's special tokens, or NULL */
    char *eos_token;
    char *unk_token;
    char *pad_token;
} ChatTemplate;

/* The chat template of checkpoint MODEL: its chat_template.jinja, else
 * tokenizer_config.json's "chat_template" (a string, or a list of named
 * templates of which "default" is taken). An error when it has none. */
int chat_template_load(ChatTemplate *t, const char *model, Error *e);

/* The same with the template read from `file` instead (--chat-template-file),
 * the special tokens still the checkpoint's; `file` NULL is the checkpoint's. */
int chat_template_load_file(ChatTemplate *t, const char *model, const char *file, Error *e);
void chat_template_free(ChatTemplate *t);

/* The text of `messages` (a JSON array of {"role", "content", ...}), with
 * the start of the assistant's reply when add_generation_prompt. The
 * variables are those transformers' apply_chat_template(messages,
 * tools=tools) passes: messages, tools (the list as given, or null when
 * tools is NULL), documents (null), add_generation_prompt, the special
 * tokens, and the members of `extra` (a JSON object such as
 * {"enable_thinking": false}, or NULL). A fresh string of *len bytes, or
 * NULL with the template's error in e. */
char *chat_template_render(const ChatTemplate *t, const JsonValue *messages, const JsonValue *tools,
                           bool add_generation_prompt, const JsonValue *extra, size_t *len, Error *e);

/* What `run template` renders: a conversation as JSON, either a list of
 * messages or an object with "messages" and the template's other variables
 * ("add_generation_prompt", "enable_thinking", "tools", ...). When
 * add_generation_prompt or thinking is not -1 it replaces the JSON's (whose
 * add_generation_prompt is false when absent, as in transformers). */
char *chat_template_render_json(const ChatTemplate *t, const JsonValue *conversation, int add_generation_prompt,
                                int thinking, size_t *len, Error *e);

typedef struct {
    char *role;                /* "system", "user" or "assistant" */
    char *content;
} ChatMessage;

typedef struct {
    ChatTemplate template;
    Tokenizer *tokenizer;
    int thinking;              /* enable_thinking: 1 or 0, or -1 to leave the template's default */
    ChatMessage *messages;     /* [n_messages] the conversation; a system message is the first */
    int n_messages, cap;
} Chat;

/* A conversation with checkpoint MODEL (its chat template, or the one in
 * template_file when not NULL) through tokenizer t, beginning with the
 * system message when `system` is not NULL. */
int chat_init(Chat *c, const char *model, const char *template_file, Tokenizer *t, const char *system, int thinking,
              Error *e);
void chat_free(Chat *c);

void chat_add(Chat *c, const char *role, const char *content);
void chat_remove_last(Chat *c);

/* Starts over: only the system message stays. */
void chat_reset(Chat *c);

/* The tokens of the conversation followed by the start of the assistant's
 * reply. When they would leave less than an eighth of `capacity` for the
 * reply, the oldest turns (a user message and the replies to it) are
 * dropped, the system message kept, until they do or only the last turn is
 * left; *dropped says how many messages went. An error when even the last
 * turn alone is longer than `capacity`, or the template fails. */
int chat_prompt(Chat *c, int capacity, TokenIds *ids, int *dropped, Error *e);

#endif
