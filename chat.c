/* chat.c - the chat template, and the command line's conversation. */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the template ---- */

/* A special token of tokenizer_config.json: a string, or an object with its
 * "content" (transformers' AddedToken); NULL when absent or null. */
static char *special_token(const JsonValue *config, const char *name) {
    const JsonValue *v = json_get(config, name);
    if (v && v->type == JSON_OBJECT) v = json_get(v, "content");
    return v && v->type == JSON_STRING ? xstrdup(v->string) : NULL;
}

/* tokenizer_config.json's "chat_template": the text, or from a list of
 * named templates the "default" one; NULL when there is none. */
static const JsonValue *template_text(const JsonValue *config) {
    const JsonValue *v = json_get(config, "chat_template");
    if (v && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->len; i++) {
            const JsonValue *name = json_get(&v->items[i], "name");
            if (name && name->type == JSON_STRING && strcmp(name->string, "default") == 0)
                return json_get(&v->items[i], "template");
        }
    return v && v->type == JSON_STRING ? v : NULL;
}

int chat_template_load(ChatTemplate *t, const char *model, Error *e) { return chat_template_load_file(t, model, NULL, e); }

int chat_template_load_file(ChatTemplate *t, const char *model, const char *file, Error *e) {
    *t = (ChatTemplate){0};
    char *config_path = model_path(model, "tokenizer_config.json"), *jinja_path = model_path(model, "chat_template.jinja");
    char *text = NULL;
    size_t len = 0;
    JsonDoc doc = {0};
    bool have_config = access(config_path, F_OK) == 0;
    int rc = have_config ? json_parse_file(&doc, config_path, e) : 0;
    if (rc == 0 && have_config && doc.root.type != JSON_OBJECT) rc = fail(e, "%s: not a JSON object", config_path);
    if (rc == 0 && have_config) {
        t->bos_token = special_token(&doc.root, "bos_token");
        t->eos_token = special_token(&doc.root, "eos_token");
        t->unk_token = special_token(&doc.root, "unk_token");
        t->pad_token = special_token(&doc.root, "pad_token");
    }
    /* The caller's file replaces the checkpoint's template; else a
     * chat_template.jinja beside it comes first, as in transformers. */
    if (rc == 0 && file) {
        rc = read_file(file, &text, &len, e);
        t->source = xstrdup(file);
    } else if (rc == 0 && access(jinja_path, F_OK) == 0) {
        rc = read_file(jinja_path, &text, &len, e);
        t->source = xstrdup(jinja_path);
    } else if (rc == 0 && have_config && template_text(&doc.root)) {
        const JsonValue *v = template_text(&doc.root);
        text = xmalloc(v->len + 1);
        memcpy(text, v->string, v->len + 1);
        len = v->len;
        t->source = xstrdup(config_path);
    } else if (rc == 0) {
        rc = fail(e, "%s: no chat template (\"chat_template\" in tokenizer_config.json, or chat_template.jinja): "
                  "chat and serve need an instruction-tuned model's template; gen needs none", model);
    }
    if (rc == 0) {
        Error te;
        t->template = template_parse(text, len, &te);
        if (!t->template) rc = fail(e, "%s: the chat template: %s", t->source, te.msg);
    }
    if (have_config && doc.arena) json_free(&doc);
    free(text);
    free(config_path);
    free(jinja_path);
    if (rc != 0) chat_template_free(t);
    return rc;
}

void chat_template_free(ChatTemplate *t) {
    template_free(t->template);
    free(t->source);
    free(t->bos_token);
    free(t->eos_token);
    free(t->unk_token);
    free(t->pad_token);
    *t = (ChatTemplate){0};
}

static JsonValue json_string(const char *s) { return (JsonValue){.type = JSON_STRING, .len = strlen(s), .string = s}; }

static JsonMember member(const char *key, JsonValue value) {
    return (JsonMember){.key = key, .key_len = strlen(key), .value = value};
}

char *chat_template_render(const ChatTemplate *t, const JsonValue *messages, const JsonValue *tools,
                           bool add_generation_prompt, const JsonValue *extra, size_t *len, Error *e) {
    /* The variables, as transformers passes them: its own, the tokenizer's
     * special tokens, then the caller's (which win on a clash). */
    size_t n_extra = extra && extra->type == JSON_OBJECT ? extra->len : 0, n = 0;
    JsonMember *vars = xmalloc((8 + n_extra) * sizeof *vars);
    vars[n++] = member("messages", *messages);
    vars[n++] = member("tools", tools ? *tools : (JsonValue){.type = JSON_NULL});
    vars[n++] = member("documents", (JsonValue){.type = JSON_NULL});
    vars[n++] = member("add_generation_prompt", (JsonValue){.type = JSON_BOOL, .boolean = add_generation_prompt});
    const char *names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    const char *tokens[] = {t->bos_token, t->eos_token, t->unk_token, t->pad_token};
    for (int i = 0; i < 4; i++)
        if (tokens[i]) vars[n++] = member(names[i], json_string(tokens[i]));
    for (size_t i = 0; i < n_extra; i++) vars[n++] = extra->members[i];
    JsonValue object = {.type = JSON_OBJECT, .len = n, .members = vars};
    Error te;
    char *text = template_render(t->template, &object, NULL, len, &te);
    free(vars);
    if (!text) fail(e, "%s: the chat template: %s", t->source, te.msg);
    return text;
}

char *chat_template_render_json(const ChatTemplate *t, const JsonValue *conversation, int add_generation_prompt,
                                int thinking, size_t *len, Error *e) {
    const JsonValue *messages = conversation->type == JSON_ARRAY ? conversation : json_get(conversation, "messages");
    if (!messages || messages->type != JSON_ARRAY) {
        fail(e, "the conversation must be a list of messages, or an object with a \"messages\" list");
        return NULL;
    }
    /* The object's other members are variables too; the flags come last. */
    size_t n_extra = conversation->type == JSON_OBJECT ? conversation->len : 0, n = 0;
    JsonMember *extra = xmalloc((n_extra + 1) * sizeof *extra);
    for (size_t i = 0; i < n_extra; i++)
        if (strcmp(conversation->members[i].key, "messages") != 0 &&
            strcmp(conversation->members[i].key, "add_generation_prompt") != 0)
            extra[n++] = conversation->members[i];
    const JsonValue *given = conversation->type == JSON_OBJECT ? json_get(conversation, "add_generation_prompt") : NULL;
    bool generation_prompt = add_generation_prompt >= 0 ? add_generation_prompt == 1 : given && given->type == JSON_BOOL && given->boolean;
    if (thinking >= 0) extra[n++] = member("enable_thinking", (JsonValue){.type = JSON_BOOL, .boolean = thinking == 1});
    JsonValue extra_object = {.type = JSON_OBJECT, .len = n, .members = extra};
    char *text = chat_template_render(t, messages, NULL, generation_prompt, &extra_object, len, e);
    free(extra);
    return text;
}

/* ---- the conversation ---- */

int chat_init(Chat *c, const char *model, const char *template_file, Tokenizer *t, const char *system, int thinking,
              Error *e) {
    *c = (Chat){.tokenizer = t, .thinking = thinking};
    if (chat_template_load_file(&c->template, model, template_file, e) != 0) return -1;
    if (system) chat_add(c, "system", system);
    return 0;
}

static void free_messages(Chat *c, int from, int to) {
    for (int i = from; i < to; i++) free(c->messages[i].role), free(c->messages[i].content);
}

void chat_free(Chat *c) {
    free_messages(c, 0, c->n_messages);
    free(c->messages);
    chat_template_free(&c->template);
    *c = (Chat){0};
}

void chat_add(Chat *c, const char *role, const char *content) {
    if (c->n_messages == c->cap) c->messages = xrealloc(c->messages, (size_t)(c->cap = c->cap ? 2 * c->cap : 8), sizeof *c->messages);
    c->messages[c->n_messages++] = (ChatMessage){.role = xstrdup(role), .content = xstrdup(content)};
}

void chat_remove_last(Chat *c) {
    if (c->n_messages == 0) return;
    free_messages(c, c->n_messages - 1, c->n_messages);
    c->n_messages--;
}

static bool has_system(const Chat *c) { return c->n_messages > 0 && strcmp(c->messages[0].role, "system") == 0; }

void chat_reset(Chat *c) {
    int keep = has_system(c);
    free_messages(c, keep, c->n_messages);
    c->n_messages = keep;
}

/* The text of the system message (if any) and messages [first, n), with
 * the start of the reply. */
static char *render(const Chat *c, int first, Error *e) {
    int keep = has_system(c), n = keep + c->n_messages - first;
    JsonValue *items = xmalloc((size_t)(n ? n : 1) * sizeof *items);
    JsonMember *fields = xmalloc((size_t)(n ? n : 1) * 2 * sizeof *fields);
    for (int i = 0; i < n; i++) {
        const ChatMessage *m = &c->messages[i < keep ? 0 : first + i - keep];
        fields[2 * i] = member("role", json_string(m->role));
        fields[2 * i + 1] = member("content", json_string(m->content));
        items[i] = (JsonValue){.type = JSON_OBJECT, .len = 2, .members = fields + 2 * i};
    }
    JsonValue messages = {.type = JSON_ARRAY, .len = (size_t)n, .items = items};
    JsonMember thinking = member("enable_thinking", (JsonValue){.type = JSON_BOOL, .boolean = c->thinking == 1});
    JsonValue extra = {.type = JSON_OBJECT, .len = c->thinking >= 0, .members = &thinking};
    size_t len;
    char *text = chat_template_render(&c->template, &messages, NULL, true, &extra, &len, e);
    free(items);
    free(fields);
    return text;
}

/* The first message of the turn after the one starting at `first`: past the
 * user message and the replies to it. */
static int next_turn(const Chat *c, int first) {
    int i = first + 1;
    while (i < c->n_messages && strcmp(c->messages[i].role, "user") != 0) i++;
    return i;
}

int chat_prompt(Chat *c, int capacity, TokenIds *ids, int *dropped, Error *e) {
    int room = capacity - capacity / 8, keep = has_system(c), first = keep;
    for (;;) {
        char *text = render(c, first, e);
        if (!text) return -1;
        ids->n = 0;
        tokenizer_encode(c->tokenizer, text, strlen(text), ENCODE_ADDED_TOKENS, ids);
        free(text);
        /* Older turns go while they crowd out the reply; the last turn
         * alone only needs to fit. */
        bool last_turn = next_turn(c, first) >= c->n_messages;
        if ((int)ids->n <= room || (last_turn && (int)ids->n <= capacity)) break;
        if (last_turn)
            return fail(e, "the message makes a prompt of %zu tokens, longer than the context of %d positions", ids->n,
                        capacity);
        first = next_turn(c, first);
    }
    /* Dropped messages leave the conversation for good. */
    free_messages(c, keep, first);
    memmove(c->messages + keep, c->messages + first, (size_t)(c->n_messages - first) * sizeof *c->messages);
    c->n_messages -= first - keep;
    *dropped = first - keep;
    return 0;
}
