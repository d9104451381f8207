/* test_reply.c - replies written by hand as Qwen2.5, Qwen3 and Llama 3.x
 * write them, split into reasoning, content and tool calls: whole, and fed
 * in every way of cutting them into pieces (one byte at a time, random
 * cuts), where the events must add up to the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../reply.h"
#include "test.h"

/* What a reply should come to. */
typedef struct {
    const char *name;
    ToolSyntax syntax;
    bool reasoning;
    ThinkStart think;
    const char *text;
    const char *content;       /* NULL: no content expected ("" and NULL differ) */
    const char *reasoning_text; /* NULL: no thinking block */
    const char *calls[4][2];   /* name, arguments */
    int n_calls;
} Case;

/* The totals the events of one run add up to. */
typedef struct {
    Buf content, reasoning;
    Buf names[8], arguments[8];
    int n_calls;
    bool call_before_arguments;
} Sum;

static void add_events(Sum *s, const ReplyParser *p) {
    for (int i = 0; i < p->n_events; i++) {
        const ReplyEvent *e = &p->events[i];
        if (e->kind == REPLY_CONTENT) buf_add(&s->content, e->text, e->len);
        else if (e->kind == REPLY_REASONING) buf_add(&s->reasoning, e->text, e->len);
        else if (e->kind == REPLY_CALL) {
            if (e->call != s->n_calls || e->call >= 8) s->call_before_arguments = false;
            else buf_puts(&s->names[s->n_calls++], p->calls[e->call].name);
        } else if (e->call < s->n_calls) buf_add(&s->arguments[e->call], e->text, e->len);
        else s->call_before_arguments = false;
    }
}

static void sum_free(Sum *s) {
    buf_free(&s->content), buf_free(&s->reasoning);
    for (int i = 0; i < 8; i++) buf_free(&s->names[i]), buf_free(&s->arguments[i]);
}

static const char *or_empty(const Buf *b) { return b->data ? b->data : ""; }

/* Runs case c cut at the positions of cuts[] (sorted, ending with its length). */
static bool run(const Case *c, const size_t *cuts, int n_cuts, const char *how) {
    ReplyParser p;
    reply_init(&p, c->syntax, c->reasoning, c->think, 42);
    Sum s = {.call_before_arguments = true};
    size_t at = 0;
    for (int i = 0; i < n_cuts; i++) {
        reply_feed(&p, c->text + at, cuts[i] - at);
        add_events(&s, &p);
        at = cuts[i];
    }
    reply_end(&p);
    add_events(&s, &p);
    bool ok = true;
    ok &= c->content ? strcmp(or_empty(&p.content), c->content) == 0 : p.content.len == 0;
    ok &= strcmp(or_empty(&s.content), or_empty(&p.content)) == 0;
    ok &= c->reasoning_text ? p.has_reasoning && strcmp(or_empty(&p.reasoning), c->reasoning_text) == 0 : !p.has_reasoning;
    ok &= strcmp(or_empty(&s.reasoning), or_empty(&p.reasoning)) == 0;
    ok &= p.n_calls == c->n_calls && s.n_calls == c->n_calls && s.call_before_arguments;
    for (int i = 0; ok && i < c->n_calls; i++) {
        ok &= strcmp(p.calls[i].name, c->calls[i][0]) == 0 && strcmp(or_empty(&p.calls[i].arguments), c->calls[i][1]) == 0;
        ok &= strcmp(or_empty(&s.names[i]), c->calls[i][0]) == 0 && strcmp(or_empty(&s.arguments[i]), c->calls[i][1]) == 0;
        ok &= strncmp(p.calls[i].id, "call_", 5) == 0 && strlen(p.calls[i].id) == 29;
        for (int j = 0; j < i; j++) ok &= strcmp(p.calls[i].id, p.calls[j].id) != 0;
    }
    CHECK(ok, "%s (%s): content '%s', reasoning '%s', %d calls%s%s%s%s", c->name, how, or_empty(&p.content),
          or_empty(&p.reasoning), p.n_calls, p.n_calls ? ": " : "", p.n_calls ? p.calls[0].name : "",
          p.n_calls ? " " : "", p.n_calls ? or_empty(&p.calls[0].arguments) : "");
    reply_free(&p);
    sum_free(&s);
    return ok;
}

static const Case cases[] = {
    {"plain text", TOOL_SYNTAX_QWEN, true, THINK_NONE, "Hello there.\n", "Hello there.\n", NULL, {{0}}, 0},
    {"no syntax: a call is text", TOOL_SYNTAX_NONE, true, THINK_NONE, "<tool_call>{\"name\": \"f\"}</tool_call>",
     "<tool_call>{\"name\": \"f\"}</tool_call>", NULL, {{0}}, 0},
    {"qwen: one call", TOOL_SYNTAX_QWEN, true, THINK_NONE,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>", NULL, NULL,
     {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}, 1},
    {"qwen: text, then two calls", TOOL_SYNTAX_QWEN, true, THINK_NONE,
     "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Asia/Tokyo\", \"nested\": {\"a\": [1, \"}\"]}}}\n</tool_call>",
     "Let me check both.", NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"tz\": \"Asia/Tokyo\", \"nested\": {\"a\": [1, \"}\"]}}"}}, 2},
    {"qwen: arguments before the name", TOOL_SYNTAX_QWEN, true, THINK_NONE,
     "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"f\"}</tool_call>", NULL, NULL, {{"f", "{\"x\": 1}"}}, 1},
    {"qwen: arguments as a JSON string", TOOL_SYNTAX_QWEN, true, THINK_NONE,
     "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>", NULL, NULL, {{"f", "{\"x\": 1}"}}, 1},
    {"qwen: no arguments", TOOL_SYNTAX_QWEN, true, THINK_NONE, "<tool_call>{\"name\": \"now\"}</tool_call>", NULL, NULL,
     {{"now", "{}"}}, 1},
    {"qwen: broken JSON is content", TOOL_SYNTAX_QWEN, true, THINK_NONE, "A <tool_call>{\"name\": oops}</tool_call> B",
     "A<tool_call>{\"name\": oops}</tool_call> B", NULL, {{0}}, 0},
    {"qwen: no name is content", TOOL_SYNTAX_QWEN, true, THINK_NONE, "<tool_call>{\"x\": 1}</tool_call>",
     "<tool_call>{\"x\": 1}</tool_call>", NULL, {{0}}, 0},
    {"qwen: not an object is content", TOOL_SYNTAX_QWEN, true, THINK_NONE, "<tool_call>[1]", "<tool_call>[1]", NULL, {{0}}, 0},
    {"qwen: cut short after the name", TOOL_SYNTAX_QWEN, true, THINK_NONE,
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Pa", NULL, NULL, {{"f", "{\"city\": \"Pa"}}, 1},
    {"qwen: cut short in the closer", TOOL_SYNTAX_QWEN, true, THINK_NONE, "<tool_call>{\"name\": \"f\"}\n</tool", NULL, NULL,
     {{"f", "{}"}}, 1},
    {"qwen: cut short before the name", TOOL_SYNTAX_QWEN, true, THINK_NONE, "<tool_call>\n{\"na", "<tool_call>\n{\"na", NULL,
     {{0}}, 0},
    {"qwen: a partial opener at the end is content", TOOL_SYNTAX_QWEN, true, THINK_NONE, "So <tool_c", "So <tool_c", NULL, {{0}}, 0},
    {"qwen3: thinking, then a call", TOOL_SYNTAX_QWEN, true, THINK_MAY,
     "<think>\nThe user wants the weather.\nI will call it.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"city\": \"Oslo\"}}\n</tool_call>", NULL, "The user wants the weather.\nI will call it.", {{"get_weather", "{\"city\": \"Oslo\"}"}}, 1},
    {"qwen3: thinking, then text", TOOL_SYNTAX_QWEN, true, THINK_MAY, "<think>\nhm </thin <x\n\n</think>\n\n4 + 4 = 8.",
     "4 + 4 = 8.", "hm </thin <x", {{0}}, 0},
    {"qwen3: empty thinking", TOOL_SYNTAX_QWEN, true, THINK_MAY, "<think>\n\n</think>\n\nHi!", "Hi!", "", {{0}}, 0},
    {"qwen3: reasoning_format none keeps it inline", TOOL_SYNTAX_QWEN, false, THINK_MAY, "<think>\nx\n</think>\n\nHi!",
     "<think>\nx\n</think>\n\nHi!", NULL, {{0}}, 0},
    {"qwen3: thinking cut short", TOOL_SYNTAX_QWEN, true, THINK_MAY, "<think>\nStill thinking\n", NULL, "Still thinking", {{0}}, 0},
    {"the prompt opened <think>", TOOL_SYNTAX_NONE, true, THINK_OPEN, "Okay, so 2 + 2.\n</think>\n\nIt is 4.", "It is 4.",
     "Okay, so 2 + 2.", {{0}}, 0},
    {"<think> not at the start is text", TOOL_SYNTAX_NONE, true, THINK_MAY, "I <think> so.", "I <think> so.", NULL, {{0}}, 0},
    {"llama3: a JSON call", TOOL_SYNTAX_LLAMA3, true, THINK_NONE,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}", NULL, NULL, {{"get_weather", "{\"city\": \"Lima\"}"}}, 1},
    {"llama3: <|python_tag|> and two calls", TOOL_SYNTAX_LLAMA3, true, THINK_NONE,
     "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"n\": 1}}; {\"name\": \"b\", \"parameters\": {}}", NULL, NULL,
     {{"a", "{\"n\": 1}"}, {"b", "{}"}}, 2},
    {"llama3: \"arguments\" too", TOOL_SYNTAX_LLAMA3, true, THINK_NONE, "\n{\"name\": \"a\", \"arguments\": {\"n\": [2]}}", NULL, NULL,
     {{"a", "{\"n\": [2]}"}}, 1},
    {"llama3: text is content", TOOL_SYNTAX_LLAMA3, true, THINK_NONE, "It is sunny in Lima {\"name\": \"x\"}",
     "It is sunny in Lima {\"name\": \"x\"}", NULL, {{0}}, 0},
    {"llama3: JSON that is no call is content", TOOL_SYNTAX_LLAMA3, true, THINK_NONE, "{\"answer\": 42}", "{\"answer\": 42}", NULL,
     {{0}}, 0},
    {"llama3: text after the call is content", TOOL_SYNTAX_LLAMA3, true, THINK_NONE, "{\"name\": \"a\", \"parameters\": {}} done",
     "done", NULL, {{"a", "{}"}}, 1},
};

int main(void) {
    unsigned seed = 7;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const Case *c = &cases[k];
        size_t n = strlen(c->text), cuts[512];
        cuts[0] = n;
        run(c, cuts, 1, "whole");
        for (size_t i = 0; i < n; i++) cuts[i] = i + 1;
        run(c, cuts, (int)n, "a byte at a time");
        for (int trial = 0; trial < 20; trial++) {
            int m = 0;
            for (size_t i = 1; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                if ((seed >> 16) % 4 == 0) cuts[m++] = i;
            }
            cuts[m++] = n;
            char how[32];
            snprintf(how, sizeof how, "random cuts %d", trial);
            if (!run(c, cuts, m, how)) break;
        }
    }
    return test_summary("test_reply");
}
