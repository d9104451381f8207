/* test_tools.c - what the chat templates of tests/data/templates do with
 * tools and thinking, and the grammars of replies: each accepts the calls
 * and answers written by hand as the models write them, and refuses the
 * invalid ones (a wrong name, arguments outside the schema, text around a
 * required call, a second call when parallel_tool_calls is false). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../grammar.h"
#include "../tools.h"
#include "test.h"

static const GenerationConfig defaults = {.sampling = {.top_p = 1, .repeat_penalty = 1}, .max_new = -1};

/* The template tests/data/templates/<file> as a checkpoint's would load. */
static bool load_template(ChatTemplate *t, const char *file) {
    char dir[600], path[700], src[300];
    snprintf(dir, sizeof dir, "%.500s", test_scratch("work-tools"));
    snprintf(src, sizeof src, "templates/%s", file);
    unsigned long len;
    char *text = test_data(src, &len);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, len, f);
    fclose(f);
    free(text);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "wb");
    fputs("{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}", f);
    fclose(f);
    Error e;
    bool ok = chat_template_load(t, dir, &e) == 0;
    CHECK(ok, "%s loads (%s)", file, ok ? "" : e.msg);
    return ok;
}

static void test_caps(void) {
    struct {
        const char *file;
        bool tools, thinking;
        ToolSyntax syntax;
    } want[] = {
        {"qwen2.5.jinja", true, false, TOOL_SYNTAX_QWEN},      {"qwen3.jinja", true, true, TOOL_SYNTAX_QWEN},
        {"tools_dated.jinja", true, false, TOOL_SYNTAX_LLAMA3}, {"llama3_like.jinja", false, false, TOOL_SYNTAX_NONE},
        {"reasoning_like.jinja", false, false, TOOL_SYNTAX_NONE}, {"small_chatml.jinja", false, false, TOOL_SYNTAX_NONE},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        ChatTemplate t;
        if (!load_template(&t, want[i].file)) continue;
        TemplateCaps caps = template_caps(&t);
        CHECK(caps.tools == want[i].tools && caps.thinking == want[i].thinking && caps.syntax == want[i].syntax,
              "%s: tools %d, thinking %d, syntax %s", want[i].file, caps.tools, caps.thinking, tool_syntax_name(caps.syntax));
        chat_template_free(&t);
    }
    TemplateCaps none = template_caps(NULL);
    CHECK(!none.tools && !none.thinking && none.syntax == TOOL_SYNTAX_NONE, "no template: nothing");

    TemplateCaps qwen3 = {.tools = true, .syntax = TOOL_SYNTAX_QWEN, .thinking = true}, qwen2 = {.tools = true};
    const char *open = "<|im_start|>assistant\n<think>\n", *closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n",
               *plain = "<|im_start|>assistant\n";
    CHECK(think_start(&qwen3, open, strlen(open)) == THINK_OPEN, "a prompt that opens <think>: the reply is inside it");
    CHECK(think_start(&qwen3, closed, strlen(closed)) == THINK_NONE, "a prompt that closes it (enable_thinking false): none");
    CHECK(think_start(&qwen3, plain, strlen(plain)) == THINK_MAY, "a thinking template: the reply may think");
    CHECK(think_start(&qwen2, plain, strlen(plain)) == THINK_NONE, "another template: no thinking");
}

/* The grammar of request `body` (a chat request), with a template that has
 * `caps`, starting as `think` says: every text of yes[] a sentence of it,
 * none of no[]. */
static void check_grammar(const char *what, const char *body, TemplateCaps caps, ThinkStart think, const char *const *yes,
                          const char *const *no, int n_triggers) {
    ApiRequest r;
    Error e;
    if (api_parse_request(&r, API_CHAT, body, strlen(body), &defaults, &e) != 0) {
        CHECK(false, "%s: the request parses (%s)", what, e.msg);
        return;
    }
    ReplyGrammar g;
    int rc = reply_grammar(&g, &r, &caps, think, &e);
    CHECK(rc == 0 && g.gbnf, "%s: a grammar (%s)", what, rc ? e.msg : "");
    Grammar *grammar = rc == 0 && g.gbnf ? grammar_new(g.gbnf, strlen(g.gbnf), &e) : NULL;
    CHECK(grammar != NULL, "%s: it compiles (%s)", what, grammar ? "" : e.msg);
    CHECK(g.n_triggers == n_triggers, "%s: %d triggers (want %d)", what, g.n_triggers, n_triggers);
    for (int i = 0; grammar && yes[i]; i++) CHECK(grammar_matches(grammar, yes[i], strlen(yes[i])), "%s accepts %s", what, yes[i]);
    for (int i = 0; grammar && no[i]; i++) CHECK(!grammar_matches(grammar, no[i], strlen(no[i])), "%s refuses %s", what, no[i]);
    grammar_free(grammar);
    free(g.gbnf);
    api_request_free(&r);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char weather_tools[] =
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

static void test_grammars(void) {
    TemplateCaps qwen = {.tools = true, .syntax = TOOL_SYNTAX_QWEN}, llama = {.tools = true, .syntax = TOOL_SYNTAX_LLAMA3};
    char body[2048];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":\"required\"}", weather_tools);
    check_grammar("qwen, required", body, qwen, THINK_NONE,
                  LIST("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
                       "<tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>",
                       "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"),
                  LIST("Sure. <tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>", "{\"name\":\"now\",\"arguments\":{}}",
                       "<tool_call>{\"name\":\"later\",\"arguments\":{}}</tool_call>",
                       "<tool_call>{\"name\":\"get_weather\",\"arguments\":{}}</tool_call>",
                       "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"unit\":\"kelvin\"}}</tool_call>",
                       "<tool_call>{\"name\":\"now\",\"arguments\":{\"x\":1}}</tool_call>", "Hello"),
                  0);
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":{\"type\":\"function\",\"function\":"
             "{\"name\":\"get_weather\"}},\"parallel_tool_calls\":false}", weather_tools);
    check_grammar("qwen, a named function, one call", body, qwen, THINK_NONE,
                  LIST("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
                  LIST("<tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>",
                       "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"A\"}}</tool_call><tool_call>{\"name\":"
                       "\"get_weather\",\"arguments\":{\"city\":\"B\"}}</tool_call>"),
                  0);
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}", weather_tools);
    check_grammar("qwen, auto: lazy from <tool_call>", body, qwen, THINK_NONE,
                  LIST("<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"),
                  LIST("Hello <tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>"), 1);
    check_grammar("llama 3, auto: lazy from \"{\" or <|python_tag|> at the start", body, llama, THINK_NONE,
                  LIST("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}",
                       "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}; {\"name\": \"now\", \"parameters\": {}}"),
                  LIST("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}", "It is {\"name\": \"now\", \"parameters\": {}}"),
                  2);
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":\"required\"}", weather_tools);
    check_grammar("llama 3, required: no <|python_tag|> spelled out", body, llama, THINK_NONE,
                  LIST("{\"name\": \"now\", \"parameters\": {}}"), LIST("<|python_tag|>{\"name\": \"now\", \"parameters\": {}}"), 0);
    check_grammar("qwen3, required, thinking first", body, (TemplateCaps){.tools = true, .syntax = TOOL_SYNTAX_QWEN, .thinking = true},
                  THINK_MAY,
                  LIST("<think>\nThe user wants the time. </thin <x\n</think>\n\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
                       "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"),
                  LIST("<think>a</think> b</think><tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>",
                       "<think>a</think>Hi"),
                  0);
    check_grammar("required, the prompt opened <think>", body, (TemplateCaps){.tools = true, .syntax = TOOL_SYNTAX_QWEN},
                  THINK_OPEN, LIST("Hm.\n</think>\n\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"),
                  LIST("<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"), 0);

    const char *schema = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
                         "\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"n\":"
                         "{\"type\":\"integer\",\"minimum\":1,\"maximum\":5}},\"required\":[\"n\"],\"additionalProperties\":false}}}}";
    check_grammar("json_schema", schema, qwen, THINK_NONE, LIST("{\"n\": 3}", "{\n  \"n\": 5\n}"),
                  LIST("{\"n\": 6}", "{}", "{\"n\": 3, \"m\": 1}", "Here: {\"n\": 3}", "<think>x</think>{\"n\": 3}"), 0);
    check_grammar("json_schema, thinking first", schema, qwen, THINK_MAY, LIST("<think>\nfive?\n</think>\n\n{\"n\": 3}", "{\"n\": 1}"),
                  LIST("<think>x</think>{\"n\": 0}"), 0);
    const char *object = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}";
    check_grammar("json_object", object, qwen, THINK_NONE, LIST("{}", "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}"),
                  LIST("[]", "\"x\"", "{\"a\": }", "{} {}"), 0);
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"response_format\":{\"type\":\"json_object\"}}", weather_tools);
    check_grammar("json_object or a call (auto)", body, qwen, THINK_NONE,
                  LIST("{\"a\": 1}", "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"), LIST("Hi"), 0);
    const char *gbnf = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\"}";
    check_grammar("llama.cpp's grammar field", gbnf, qwen, THINK_MAY, LIST("yes", "no"), LIST("<think>x</think>yes", "maybe"), 0);
}

/* Requests the grammar cannot serve: refused with a message for the client. */
static void refused(const char *body, TemplateCaps caps, const char *want) {
    ApiRequest r;
    Error e = {{0}};
    if (api_parse_request(&r, API_CHAT, body, strlen(body), &defaults, &e) != 0) {
        CHECK(false, "the request parses (%s)", e.msg);
        return;
    }
    ReplyGrammar g;
    int rc = reply_grammar(&g, &r, &caps, THINK_NONE, &e);
    CHECK(rc == -1 && strstr(e.msg, want), "%s: refused with '%s' (got '%s')", body, want, e.msg);
    if (rc == 0) free(g.gbnf);
    api_request_free(&r);
}

static void test_refusals(void) {
    TemplateCaps qwen = {.tools = true, .syntax = TOOL_SYNTAX_QWEN};
    const char *tools = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
                        "{\"name\":\"f\"}}]}";
    refused(tools, (TemplateCaps){0}, "does not show tools");
    refused(tools, (TemplateCaps){.tools = true}, "writes tool calls in a form");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
            "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}}}]}",
            qwen, "tools[0].function.parameters: schema at /properties/a");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
            "{\"name\":\"a\",\"schema\":{\"type\":\"number\",\"multipleOf\":2}}}}",
            qwen, "the response format's schema: schema at /: keyword 'multipleOf' is not supported");
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    test_caps();
    test_grammars();
    test_refusals();
    return test_summary("test_tools");
}
