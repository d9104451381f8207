/* chat.c - the conversation, its rendering and its context handling. */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *qwen_default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

int chat_init(Chat *c, const char *model, Tokenizer *t, const char *system, int thinking, Error *e) {
    (void)model;
    *c = (Chat){.tokenizer = t, .system = system ? xstrdup(system) : NULL, .thinking = thinking};
    if (tokenizer_find(t, "<|im_start|>", 12) < 0 || tokenizer_find(t, "<|im_end|>", 10) < 0)
        return fail(e, "tokenizer.json has no <|im_start|> or <|im_end|> token: not a chat model");
    return 0;
}

void chat_reset(Chat *c) {
    for (int i = 0; i < c->n_messages; i++) free(c->messages[i].role), free(c->messages[i].content);
    c->n_messages = 0;
}

void chat_free(Chat *c) {
    chat_reset(c);
    free(c->messages);
    free(c->system);
    memset(c, 0, sizeof *c);
}

void chat_add(Chat *c, const char *role, const char *content) {
    if (c->n_messages == c->cap) c->messages = xrealloc(c->messages, (size_t)(c->cap = c->cap ? 2 * c->cap : 8), sizeof *c->messages);
    c->messages[c->n_messages++] = (ChatMessage){.role = xstrdup(role), .content = xstrdup(content)};
}

void chat_remove_last(Chat *c) {
    if (c->n_messages == 0) return;
    c->n_messages--;
    free(c->messages[c->n_messages].role);
    free(c->messages[c->n_messages].content);
}

/* Appends s to a growing string. */
static void append(char **buf, size_t *len, const char *s) {
    size_t n = strlen(s);
    *buf = xrealloc(*buf, *len + n + 1, 1);
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* The conversation from message `first` on, in ChatML, with the start of
 * the assistant's reply. */
static char *render(const Chat *c, int first) {
    char *text = NULL;
    size_t len = 0;
    append(&text, &len, "<|im_start|>system\n");
    append(&text, &len, c->system ? c->system : qwen_default_system);
    append(&text, &len, "<|im_end|>\n");
    for (int i = first; i < c->n_messages; i++) {
        append(&text, &len, "<|im_start|>");
        append(&text, &len, c->messages[i].role);
        append(&text, &len, "\n");
        append(&text, &len, c->messages[i].content);
        append(&text, &len, "<|im_end|>\n");
    }
    append(&text, &len, "<|im_start|>assistant\n");
    return text;
}

int chat_prompt(Chat *c, int capacity, TokenIds *ids, int *dropped, Error *e) {
    int room = capacity - capacity / 8, first = 0;
    *dropped = 0;
    for (;;) {
        char *text = render(c, first);
        ids->n = 0;
        tokenizer_encode(c->tokenizer, text, strlen(text), ENCODE_ADDED_TOKENS, ids);
        free(text);
        if ((int)ids->n <= room) break;
        if (first == c->n_messages - 1)
            return fail(e, "that message is %zu tokens with the conversation's frame, too long for the context of %d",
                        ids->n, capacity);
        first++;
    }
    /* Dropped messages leave the conversation for good. */
    for (int i = 0; i < first; i++) free(c->messages[i].role), free(c->messages[i].content);
    memmove(c->messages, c->messages + first, (size_t)(c->n_messages - first) * sizeof *c->messages);
    c->n_messages -= first;
    *dropped = first;
    return 0;
}
