/* reply.c - reasoning, content and tool calls out of a reply's text, as it
 * streams in: a small state machine over the text not yet given out. */
#include "reply.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

static const char THINK_OPEN_TAG[] = "<think>", THINK_CLOSE_TAG[] = "</think>";
static const char QWEN_OPENER[] = "<tool_call>", QWEN_CLOSER[] = "</tool_call>", PYTHON_TAG[] = "<|python_tag|>";

/* Where the scan of a call's object is among its own members. */
enum { TOP_KEY_NEXT, TOP_KEY, TOP_COLON, TOP_VALUE_NEXT, TOP_VALUE, TOP_VALUE_DONE };

void reply_init(ReplyParser *p, ToolSyntax syntax, bool reasoning, ThinkStart think, uint64_t seed) {
    *p = (ReplyParser){.syntax = syntax, .split_thinking = reasoning, .ids = seed, .current = -1};
    p->state = !reasoning ? PARSE_BODY : think == THINK_OPEN ? PARSE_THINK : PARSE_START;
    p->has_reasoning = reasoning && think == THINK_OPEN;
    p->drop_blanks = p->state == PARSE_THINK;
}

void reply_free(ReplyParser *p) {
    buf_free(&p->pending);
    buf_free(&p->raw);
    buf_free(&p->object);
    buf_free(&p->content);
    buf_free(&p->reasoning);
    for (int i = 0; i < p->n_calls; i++) free(p->calls[i].name), buf_free(&p->calls[i].arguments);
    free(p->calls);
    free(p->events);
    free(p->offsets);
    buf_free(&p->scratch);
    *p = (ReplyParser){0};
}

/* ---- events ---- */

/* Records an event; text of the same kind right after the last event's
 * joins it. Texts are kept as offsets into scratch until the feed ends
 * (scratch may move as it grows). */
static void emit(ReplyParser *p, ReplyEventKind kind, int call, const char *text, size_t len) {
    if (kind != REPLY_CALL && len == 0) return;
    ReplyEvent *last = p->n_events ? &p->events[p->n_events - 1] : NULL;
    size_t at = p->scratch.len;
    buf_add(&p->scratch, text, len);
    if (kind == REPLY_CONTENT) buf_add(&p->content, text, len);
    if (kind == REPLY_REASONING) buf_add(&p->reasoning, text, len);
    if (kind == REPLY_ARGUMENTS) buf_add(&p->calls[call].arguments, text, len);
    if (last && kind != REPLY_CALL && last->kind == kind && last->call == call) {
        last->len += len;
        return;
    }
    if (p->n_events == p->cap_events) {
        p->cap_events = p->cap_events ? 2 * p->cap_events : 8;
        p->events = xrealloc(p->events, (size_t)p->cap_events, sizeof *p->events);
        p->offsets = xrealloc(p->offsets, (size_t)p->cap_events, sizeof *p->offsets);
    }
    p->offsets[p->n_events] = at;
    p->events[p->n_events++] = (ReplyEvent){.kind = kind, .call = call, .len = len};
}

/* A new call named name[0..len): its id drawn, announced. */
static void start_call(ReplyParser *p, const char *name, size_t len) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    p->calls = xrealloc(p->calls, (size_t)p->n_calls + 1, sizeof *p->calls);
    ReplyCall *c = &p->calls[p->n_calls];
    *c = (ReplyCall){.name = xmalloc(len + 1)};
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    strcpy(c->id, "call_");
    for (int i = 0; i < 24; i++) c->id[5 + i] = alphabet[(p->ids = mix64(p->ids + 0x9e3779b97f4a7c15u)) % 62];
    c->id[29] = '\0';
    p->current = p->n_calls++;
    emit(p, REPLY_CALL, p->current, "", 0);
}

/* ---- the text held ---- */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Drops the first n bytes of the pending text. */
static void consume(ReplyParser *p, size_t n) {
    memmove(p->pending.data, p->pending.data + n, p->pending.len - n);
    p->pending.len -= n;
    if (p->pending.data) p->pending.data[p->pending.len] = '\0';
}

/* Drops leading whitespace while drop_blanks; false when none but it is there. */
static bool drop_leading_blanks(ReplyParser *p) {
    if (!p->drop_blanks) return true;
    size_t n = 0;
    while (n < p->pending.len && is_blank(p->pending.data[n])) n++;
    consume(p, n);
    if (p->pending.len == 0) return false;
    p->drop_blanks = false;
    return true;
}

/* Where `tag` first appears in the pending text, or the length when it does not. */
static size_t find(const ReplyParser *p, const char *tag) {
    size_t n = strlen(tag);
    for (size_t i = 0; i + n <= p->pending.len; i++)
        if (memcmp(p->pending.data + i, tag, n) == 0) return i;
    return p->pending.len;
}

/* How much of the pending text is surely not the start of `tag` (nor,
 * when trim, whitespace that may come right before it). */
static size_t safe_before(const ReplyParser *p, const char *tag, bool trim) {
    size_t len = p->pending.len, n = strlen(tag), keep = 0;
    for (size_t k = n - 1; k > 0; k--)
        if (k <= len && memcmp(p->pending.data + len - k, tag, k) == 0) {
            keep = k;
            break;
        }
    size_t safe = len - keep;
    while (trim && safe > 0 && is_blank(p->pending.data[safe - 1])) safe--;
    return safe;
}

/* Whether the pending text (from `at`) begins with tag; *partial when it is
 * a start of tag that more text could complete. */
static bool begins_with(const ReplyParser *p, size_t at, const char *tag, bool *partial) {
    size_t n = strlen(tag), have = p->pending.len - at;
    *partial = have < n && memcmp(p->pending.data + at, tag, have) == 0;
    return have >= n && memcmp(p->pending.data + at, tag, n) == 0;
}

/* Text without the whitespace at its end. */
static size_t trimmed(const char *s, size_t n) {
    while (n > 0 && is_blank(s[n - 1])) n--;
    return n;
}

/* ---- a call's JSON ---- */

/* Starts reading a call whose opener (or nothing) is `opener`. */
static void begin_call(ReplyParser *p, const char *opener) {
    p->raw.len = p->object.len = 0;
    buf_puts(&p->raw, opener);
    p->depth = 0;
    p->in_string = p->escaped = p->streaming = false;
    p->top = TOP_KEY_NEXT;
    p->key_len = 0;
    p->name_end = p->args_end = 0;
    p->current = -1;
    p->state = PARSE_CALL;
}

static bool key_is(const ReplyParser *p, const char *name) {
    return p->key_len == strlen(name) && memcmp(p->key, name, p->key_len) == 0;
}

static bool key_is_arguments(const ReplyParser *p) { return key_is(p, "arguments") || key_is(p, "parameters"); }

/* A member's value begins at object[at]: the arguments' object or list is
 * given out from here when the call's name is known. */
static void start_value(ReplyParser *p, size_t at) {
    p->top = TOP_VALUE;
    p->value_start = at;
    if (!key_is_arguments(p)) return;
    p->args_start = at;
    char c = p->object.data[at];
    bool name_known = p->name_end > 0 && !memchr(p->object.data + p->name_start, '\\', p->name_end - p->name_start);
    if ((c == '{' || c == '[') && name_known && p->current < 0) {
        start_call(p, p->object.data + p->name_start, p->name_end - p->name_start);
        p->streaming = true;
    }
}

/* The member's value ended just before object[end]. */
static void end_value(ReplyParser *p, size_t end) {
    p->top = TOP_VALUE_DONE;
    if (key_is(p, "name") && p->object.data[p->value_start] == '"') p->name_start = p->value_start + 1, p->name_end = end - 1;
    if (key_is_arguments(p)) p->args_end = end, p->streaming = false;
}

/* Scans one more byte of the call's object, keeping track of its own
 * members (depth 1): which key, where its value is. */
static void scan(ReplyParser *p, char c) {
    size_t at = p->object.len;
    buf_add(&p->object, &c, 1);
    bool streaming = p->streaming, top = p->depth == 1;
    bool scalar = top && p->top == TOP_VALUE && p->object.data[p->value_start] != '"' &&
                  p->object.data[p->value_start] != '{' && p->object.data[p->value_start] != '[';
    if (p->in_string) {
        if (p->escaped) p->escaped = false;
        else if (c == '\\') p->escaped = true;
        else if (c == '"') {
            p->in_string = false;
            if (top && p->top == TOP_KEY) p->top = TOP_COLON;
            else if (top && p->top == TOP_VALUE) end_value(p, at + 1);
        } else if (top && p->top == TOP_KEY && p->key_len < sizeof p->key - 1) {
            p->key[p->key_len++] = c;
        }
    } else if (is_blank(c)) {
        if (scalar) end_value(p, at);
    } else if (c == '"') {
        p->in_string = true;
        if (top && p->top == TOP_KEY_NEXT) p->top = TOP_KEY, p->key_len = 0;
        else if (top && p->top == TOP_VALUE_NEXT) start_value(p, at);
    } else if (c == '{' || c == '[') {
        if (top && p->top == TOP_VALUE_NEXT) start_value(p, at);
        if (++p->depth == 1) p->top = TOP_KEY_NEXT;
    } else if (c == '}' || c == ']') {
        if (scalar) end_value(p, at);
        if (--p->depth == 1 && p->top == TOP_VALUE) end_value(p, at + 1);
    } else if (c == ':') {
        if (top && p->top == TOP_COLON) p->top = TOP_VALUE_NEXT;
    } else if (c == ',') {
        if (scalar) end_value(p, at);
        if (top) p->top = TOP_KEY_NEXT;
    } else if (top && p->top == TOP_VALUE_NEXT) {
        start_value(p, at);
    }
    if (streaming || p->streaming) emit(p, REPLY_ARGUMENTS, p->current, &c, 1);
}

/* What was read as a call is none: its text is content. */
static void not_a_call(ReplyParser *p) {
    emit(p, REPLY_CONTENT, -1, p->raw.data ? p->raw.data : "", p->raw.len);
    p->state = PARSE_CONTENT;
}

/* A call's object is complete: announced already, or announced now with
 * its arguments whole (a JSON string of them: the text it holds; none:
 * {}); or, being no call after all (not JSON, no name), content. */
static void finish_call(ReplyParser *p) {
    JsonDoc doc;
    Error e;
    bool ok = json_parse(&doc, p->object.data, p->object.len, &e) == 0;
    const JsonValue *name = ok ? json_get(&doc.root, "name") : NULL;
    if (p->current < 0 && (!name || name->type != JSON_STRING || doc.root.type != JSON_OBJECT)) {
        if (ok) json_free(&doc);
        not_a_call(p);
        return;
    }
    if (p->current < 0) {
        start_call(p, name->string, name->len);
        const char *args = p->object.data + p->args_start;
        size_t n = p->args_end - p->args_start;
        if (p->args_end == 0) emit(p, REPLY_ARGUMENTS, p->current, "{}", 2);
        else if (args[0] != '"') emit(p, REPLY_ARGUMENTS, p->current, args, n);
        else {
            const JsonValue *v = json_get(&doc.root, "arguments");
            if (!v || v->type != JSON_STRING) v = json_get(&doc.root, "parameters");
            if (v && v->type == JSON_STRING) emit(p, REPLY_ARGUMENTS, p->current, v->string, v->len);
        }
    }
    if (ok) json_free(&doc);
    p->current = -1;
    p->state = PARSE_AFTER_CALL;
    p->drop_blanks = true;
}

/* ---- the states ---- */

/* One step over the pending text; false when it needs more text. */
static bool step(ReplyParser *p) {
    bool partial;
    switch (p->state) {
    case PARSE_START: {
        /* A reply that opens with <think> (after whitespace) is thinking. */
        size_t at = 0;
        while (at < p->pending.len && is_blank(p->pending.data[at])) at++;
        if (at == p->pending.len) return false;
        if (begins_with(p, at, THINK_OPEN_TAG, &partial)) {
            consume(p, at + strlen(THINK_OPEN_TAG));
            p->state = PARSE_THINK;
            p->has_reasoning = p->drop_blanks = true;
            return true;
        }
        if (partial) return false;
        p->state = PARSE_BODY;
        return true;
    }
    case PARSE_THINK: {
        if (!drop_leading_blanks(p)) return false;
        size_t end = find(p, THINK_CLOSE_TAG);
        if (end < p->pending.len) {
            emit(p, REPLY_REASONING, -1, p->pending.data, trimmed(p->pending.data, end));
            consume(p, end + strlen(THINK_CLOSE_TAG));
            p->state = PARSE_BODY;
            p->drop_blanks = true;
            return true;
        }
        size_t safe = safe_before(p, THINK_CLOSE_TAG, true);
        emit(p, REPLY_REASONING, -1, p->pending.data, safe);
        consume(p, safe);
        return false;
    }
    case PARSE_BODY: {
        /* Llama 3: a call is the whole reply, opening with "{" or <|python_tag|>. */
        if (!drop_leading_blanks(p)) return false;
        if (p->syntax != TOOL_SYNTAX_LLAMA3) {
            p->state = PARSE_CONTENT;
            return true;
        }
        size_t at = 0;
        while (at < p->pending.len && is_blank(p->pending.data[at])) at++;
        if (at == p->pending.len) return false;
        if (begins_with(p, at, PYTHON_TAG, &partial)) {
            consume(p, at + strlen(PYTHON_TAG));
            begin_call(p, PYTHON_TAG);
            return true;
        }
        if (partial) return false;
        if (p->pending.data[at] == '{') {
            consume(p, at);
            begin_call(p, "");
            return true;
        }
        p->state = PARSE_CONTENT;
        return true;
    }
    case PARSE_CONTENT: {
        if (!drop_leading_blanks(p)) return false;
        if (p->syntax != TOOL_SYNTAX_QWEN) {
            emit(p, REPLY_CONTENT, -1, p->pending.data, p->pending.len);
            consume(p, p->pending.len);
            return false;
        }
        size_t at = find(p, QWEN_OPENER);
        if (at < p->pending.len) {
            emit(p, REPLY_CONTENT, -1, p->pending.data, trimmed(p->pending.data, at));
            consume(p, at + strlen(QWEN_OPENER));
            begin_call(p, QWEN_OPENER);
            return true;
        }
        size_t safe = safe_before(p, QWEN_OPENER, true);
        emit(p, REPLY_CONTENT, -1, p->pending.data, safe);
        consume(p, safe);
        return false;
    }
    case PARSE_CALL:
        for (size_t i = 0; i < p->pending.len; i++) {
            char c = p->pending.data[i];
            /* Before the object: whitespace, then "{" or it is no call. */
            if (p->object.len == 0 && !is_blank(c) && c != '{') {
                consume(p, i);
                not_a_call(p);
                return true;
            }
            buf_add(&p->raw, &c, 1);
            if (p->object.len == 0 && is_blank(c)) continue;
            scan(p, c);
            if (p->depth == 0) {
                consume(p, i + 1);
                finish_call(p);
                return true;
            }
        }
        consume(p, p->pending.len);
        return false;
    case PARSE_AFTER_CALL: {
        /* Qwen: "</tool_call>"; Llama 3: ";" and the next call. Anything
         * else is content. */
        if (!drop_leading_blanks(p)) return false;
        const char *closer = p->syntax == TOOL_SYNTAX_QWEN ? QWEN_CLOSER : ";";
        if (begins_with(p, 0, closer, &partial)) {
            consume(p, strlen(closer));
            p->drop_blanks = true;
            if (p->syntax == TOOL_SYNTAX_QWEN) p->state = PARSE_CONTENT;
            else begin_call(p, "");
            return true;
        }
        if (partial) return false;
        p->state = PARSE_CONTENT;
        return true;
    }
    }
    return false;
}

/* Points the events' texts into the scratch buffer, now that it is whole. */
static void settle(ReplyParser *p) {
    for (int i = 0; i < p->n_events; i++) p->events[i].text = p->scratch.data ? p->scratch.data + p->offsets[i] : "";
}

void reply_feed(ReplyParser *p, const char *text, size_t len) {
    p->n_events = 0;
    p->scratch.len = 0;
    buf_add(&p->pending, text, len);
    while (step(p)) {}
    settle(p);
}

void reply_end(ReplyParser *p) {
    p->n_events = 0;
    p->scratch.len = 0;
    while (step(p)) {}
    /* What is still held: undecided text is content, unfinished thinking
     * is reasoning; a call cut short keeps what it announced, or is content;
     * the start of a call's closer is dropped with it. */
    bool partial;
    const char *rest = p->pending.data ? p->pending.data : "";
    if (p->state == PARSE_THINK) emit(p, REPLY_REASONING, -1, rest, trimmed(rest, p->pending.len));
    else if (p->state == PARSE_CALL && p->current < 0) not_a_call(p);
    else if (p->state == PARSE_AFTER_CALL) {
        begins_with(p, 0, p->syntax == TOOL_SYNTAX_QWEN ? QWEN_CLOSER : ";", &partial);
        if (!partial) emit(p, REPLY_CONTENT, -1, rest, trimmed(rest, p->pending.len));
    }
    else if (p->state != PARSE_CALL) emit(p, REPLY_CONTENT, -1, rest, p->pending.len);
    consume(p, p->pending.len);
    settle(p);
}
