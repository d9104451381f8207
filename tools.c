/* tools.c - probing a chat template, and the grammar of a reply. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "schema.h"

/* ---- the template ---- */

/* The text template t renders for the JSON of a conversation's variables
 * (messages and the rest), or NULL when it fails on them. */
static char *render_probe(const ChatTemplate *t, const char *variables) {
    JsonDoc doc;
    Error e;
    if (json_parse(&doc, variables, strlen(variables), &e) != 0) die("a probe conversation is not JSON: %s", e.msg);
    size_t len;
    char *text = chat_template_render(t, json_get(&doc.root, "messages"), json_get(&doc.root, "tools"), true,
                                      json_get(&doc.root, "extra"), &len, &e);
    json_free(&doc);
    return text;
}

/* A conversation with a probe tool, a call of it and its result. */
static const char probe_tools[] =
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"probe_tool_7f3a\", \"description\": \"d\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"probe_arg\": {\"type\": \"integer\"}}}}}]";
static const char probe_call[] =
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_probe\", \"type\": \"function\", "
    "\"function\": {\"name\": \"probe_tool_7f3a\", \"arguments\": {\"probe_arg\": 1}}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"call_probe\", \"content\": \"ok\"}";

TemplateCaps template_caps(const ChatTemplate *t) {
    TemplateCaps caps = {0};
    if (!t) return caps;
    char variables[1024];
    /* Tools: their definitions reach the text. */
    snprintf(variables, sizeof variables, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], %s}", probe_tools);
    char *text = render_probe(t, variables);
    caps.tools = text && strstr(text, "probe_tool_7f3a");
    free(text);
    /* The syntax: how the template writes the call in the history. */
    snprintf(variables, sizeof variables, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, %s], %s}", probe_call,
             probe_tools);
    text = render_probe(t, variables);
    if (text && strstr(text, "<tool_call>")) caps.syntax = TOOL_SYNTAX_QWEN;
    else if (text && strstr(text, "\"parameters\"") && strstr(text, "\"probe_tool_7f3a\"")) caps.syntax = TOOL_SYNTAX_LLAMA3;
    free(text);
    /* Thinking: enable_thinking makes a difference. */
    const char *hi = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
    snprintf(variables, sizeof variables, "{%s, \"extra\": {\"enable_thinking\": true}}", hi);
    char *on = render_probe(t, variables);
    snprintf(variables, sizeof variables, "{%s, \"extra\": {\"enable_thinking\": false}}", hi);
    char *off = render_probe(t, variables);
    caps.thinking = on && off && strcmp(on, off) != 0;
    free(on);
    free(off);
    return caps;
}

const char *tool_syntax_name(ToolSyntax s) {
    return s == TOOL_SYNTAX_QWEN ? "qwen" : s == TOOL_SYNTAX_LLAMA3 ? "llama3" : "none";
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Whether text[0..len) ends with `tail` once trailing whitespace is dropped. */
static bool ends_with_text(const char *text, size_t len, const char *tail) {
    while (len > 0 && is_blank(text[len - 1])) len--;
    size_t n = strlen(tail);
    return len >= n && memcmp(text + len - n, tail, n) == 0;
}

ThinkStart think_start(const TemplateCaps *caps, const char *prompt, size_t len) {
    if (ends_with_text(prompt, len, "<think>")) return THINK_OPEN;
    if (ends_with_text(prompt, len, "</think>")) return THINK_NONE;
    return caps->thinking ? THINK_MAY : THINK_NONE;
}

/* ---- the grammar ---- */

/* "thought": any text in which "</think>" does not appear. The rules are
 * the automaton that matches that literal, written as loops: once "<" (and
 * maybe more of the literal) is read, `think-back` comes back to that point
 * on another "<", `think-out` leaves the literal for good, and the text may
 * end inside it (`think-part`). The literal's "<" appears in it only first,
 * which keeps the automaton this simple. */
static void put_thought(Buf *b) {
    static const char literal[] = "</think>";
    int n = (int)strlen(literal);
    buf_puts(b, "thought ::= ([^<] | \"<\" think-back* think-out)* (\"<\" think-back* think-part?)?\n");
    buf_puts(b, "think-back ::= \"<\"");
    for (int k = 2; k < n; k++) buf_printf(b, " | \"%.*s<\"", k - 1, literal + 1);
    buf_puts(b, "\nthink-out ::= ");
    for (int k = 1; k < n; k++) {
        if (k > 1) buf_printf(b, " | \"%.*s\" ", k - 1, literal + 1);
        buf_printf(b, "[^<%c]", literal[k]);
    }
    buf_puts(b, "\nthink-part ::= ");
    for (int k = 2; k < n; k++) buf_printf(b, "%s\"%.*s\"", k > 2 ? " | " : "", k - 1, literal + 1);
    buf_puts(b, "\n");
}

/* The rule of the thinking a reply may start with ("" when none). */
static void put_think(Buf *b, ThinkStart think) {
    if (think == THINK_MAY) buf_puts(b, "think ::= (\"<think>\" thought \"</think>\" ws)?\n");
    else if (think == THINK_OPEN) buf_puts(b, "think ::= thought \"</think>\" ws\n");
    else buf_puts(b, "think ::= \"\"\n");
    if (think != THINK_NONE) put_thought(b);
}

/* The parameters of a function that gives none: OpenAI's empty parameter
 * list, {} alone. */
static JsonMember no_parameter_members[2] = {
    {.key = "type", .key_len = 4, .value = {.type = JSON_STRING, .len = 6, .string = "object"}},
    {.key = "properties", .key_len = 10, .value = {.type = JSON_OBJECT}},
};
static const JsonValue no_parameters = {.type = JSON_OBJECT, .len = 2, .members = no_parameter_members};

/* The tool calls: "calls" and the rules it needs; each function's
 * arguments follow its parameters schema (no parameters: {}). */
static int put_calls(Buf *b, const ApiRequest *r, ToolSyntax syntax, Error *e) {
    const char *opener = syntax == TOOL_SYNTAX_QWEN ? "\"<tool_call>\" ws " : "";
    const char *closer = syntax == TOOL_SYNTAX_QWEN ? " ws \"</tool_call>\"" : "";
    const char *between = syntax == TOOL_SYNTAX_QWEN ? "ws" : "ws \";\" ws";
    const char *key = syntax == TOOL_SYNTAX_QWEN ? "arguments" : "parameters";
    if (r->parallel_tool_calls) buf_printf(b, "calls ::= call-block (%s call-block)*\n", between);
    else buf_puts(b, "calls ::= call-block\n");
    buf_printf(b, "call-block ::= %scall%s\n", opener, closer);
    buf_puts(b, "call ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws (");
    const JsonValue *tools = r->tools;
    int written = 0;
    for (size_t i = 0; i < tools->len; i++) {
        const JsonValue *f = json_get(&tools->items[i], "function");
        const char *name = json_get(f, "name")->string;
        if (r->tool_choice == API_TOOLS_NAMED && strcmp(name, r->tool_name) != 0) continue;
        /* Names are letters, digits, '_' and '-' (api.c checked): no escapes. */
        buf_printf(b, "%s\"\\\"%s\\\"\" ws \",\" ws \"\\\"%s\\\"\" ws \":\" ws t%zu-1", written++ ? " | " : "", name, key, i);
    }
    buf_puts(b, ") ws \"}\"\n");
    for (size_t i = 0; i < tools->len; i++) {
        const JsonValue *f = json_get(&tools->items[i], "function");
        if (r->tool_choice == API_TOOLS_NAMED && strcmp(json_get(f, "name")->string, r->tool_name) != 0) continue;
        const JsonValue *parameters = json_get(f, "parameters");
        if (!parameters || parameters->type == JSON_NULL) parameters = &no_parameters;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        Error why;
        char *rules = schema_gbnf_rules(parameters, prefix, &why);
        if (!rules) return fail(e, "tools[%zu].function.parameters: %s", i, why.msg);
        buf_puts(b, rules);
        free(rules);
    }
    return 0;
}

/* The answer in a JSON response format: "json" and the rules it needs. */
static int put_json(Buf *b, const ApiRequest *r, Error *e) {
    if (r->format == API_FORMAT_JSON_OBJECT) {
        buf_puts(b, "json ::= object\n");
        return 0;
    }
    Error why;
    char *rules = schema_gbnf_rules(r->schema, "s", &why);
    if (!rules) return fail(e, "the response format's schema: %s", why.msg);
    buf_printf(b, "json ::= s1\n%s", rules);
    free(rules);
    return 0;
}

int reply_grammar(ReplyGrammar *g, const ApiRequest *r, const TemplateCaps *caps, ThinkStart think, Error *e) {
    *g = (ReplyGrammar){0};
    bool calls = r->tools && r->tool_choice != API_TOOLS_NONE, json = r->format != API_FORMAT_TEXT;
    if (r->grammar) {
        g->gbnf = xstrdup(r->grammar);
        return 0;
    }
    if (!calls && !json) return 0;
    if (calls && !caps->tools) return fail(e, "the model's chat template does not show tools to the model: give no 'tools'");
    if (calls && caps->syntax == TOOL_SYNTAX_NONE)
        return fail(e, "the model's chat template writes tool calls in a form this server does not read "
                       "(it reads Qwen's <tool_call> and Llama 3's JSON calls)");
    Buf b = {0};
    bool lazy = calls && r->tool_choice == API_TOOLS_AUTO && !json;
    if (lazy && caps->syntax == TOOL_SYNTAX_LLAMA3) buf_puts(&b, "root ::= (\"<|python_tag|>\" ws)? calls\n");
    else if (lazy) buf_puts(&b, "root ::= calls\n");
    else if (calls && r->tool_choice != API_TOOLS_AUTO) buf_puts(&b, "root ::= think calls\n");
    else if (calls) buf_puts(&b, "root ::= think (json | calls)\n");
    else buf_puts(&b, "root ::= think json\n");
    if (!lazy) put_think(&b, think);
    int rc = (calls ? put_calls(&b, r, caps->syntax, e) : 0) || (json ? put_json(&b, r, e) : 0) ? -1 : 0;
    if (rc != 0) {
        buf_free(&b);
        return -1;
    }
    buf_puts(&b, schema_gbnf_basics());
    g->gbnf = b.data;
    if (lazy && caps->syntax == TOOL_SYNTAX_QWEN) g->triggers[g->n_triggers++] = (GrammarTrigger){"<tool_call>", false};
    if (lazy && caps->syntax == TOOL_SYNTAX_LLAMA3) {
        g->triggers[g->n_triggers++] = (GrammarTrigger){"<|python_tag|>", true};
        g->triggers[g->n_triggers++] = (GrammarTrigger){"{", true};
    }
    return 0;
}
