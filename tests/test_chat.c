/* test_chat.c - finding a checkpoint's chat template, the variables it is
 * rendered with, and the conversation's context handling, against texts
 * written out by hand; requests with tools and tool calls rendered as
 * jinja2 renders them (tests/data/templates/tools_golden.json). (The
 * template language itself: test_template.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../api.h"
#include "../chat.h"
#include "test.h"

static char dir[512];

static void write_file(const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) die("%s: cannot create", path);
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

/* Renders the JSON conversation with the checkpoint's template. */
static char *render(const char *conversation, int generation_prompt, int thinking, Error *e) {
    ChatTemplate t;
    if (chat_template_load(&t, dir, e) != 0) return NULL;
    JsonDoc doc;
    if (json_parse(&doc, conversation, strlen(conversation), e) != 0) die("%s", e->msg);
    size_t len;
    char *text = chat_template_render_json(&t, &doc.root, generation_prompt, thinking, &len, e);
    json_free(&doc);
    chat_template_free(&t);
    return text;
}

/* A template that shows every variable it is given. */
static const char *show_all =
    "{{ bos_token }}|{% for m in messages %}<{{ m.role }}:{{ m.content }}>{% endfor %}|{{ add_generation_prompt }}"
    "|{{ tools }}|{{ enable_thinking is defined }}|{{ eos_token }}|{{ pad_token is defined }}";

static void test_template_sources(void) {
    Error e = {{0}};
    char config[2048], *text;
    /* tokenizer_config.json's template and special tokens (a string, and
     * an AddedToken object as older files write them). */
    snprintf(config, sizeof config,
             "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\", \"lstrip\": false}, \"pad_token\": null,"
             " \"chat_template\": \"%s\"}", show_all);
    write_file("tokenizer_config.json", config);
    text = render("[{\"role\": \"user\", \"content\": \"Hi\"}]", -1, -1, &e);
    CHECK(text && strcmp(text, "<s>|<user:Hi>|False|None|False|</s>|False") == 0,
          "tokenizer_config.json's template, with its tokens, tools=None and add_generation_prompt False (%s)",
          text ? text : e.msg);
    free(text);
    text = render("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true, \"x\": 1}",
                  -1, 0, &e);
    CHECK(text && strcmp(text, "<s>|<user:Hi>|True|None|True|</s>|False") == 0,
          "an object's add_generation_prompt, enable_thinking from the flag (%s)", text ? text : e.msg);
    free(text);
    text = render("{\"messages\": [], \"add_generation_prompt\": true, \"tools\": [1]}", 0, -1, &e);
    CHECK(text && strcmp(text, "<s>||False|[1]|False|</s>|False") == 0, "the flag wins over the object; tools passed on (%s)",
          text ? text : e.msg);
    free(text);
    text = render("{\"messages\": 3}", -1, -1, &e);
    CHECK(!text && strstr(e.msg, "must be a list of messages"), "messages that are not a list (%s)", e.msg);

    /* A list of named templates: the default one. */
    write_file("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"tools\"},"
                                        " {\"name\": \"default\", \"template\": \"default {{ messages | length }}\"}]}");
    text = render("[]", -1, -1, &e);
    CHECK(text && strcmp(text, "default 0") == 0, "named templates: the default one (%s)", text ? text : e.msg);
    free(text);

    /* chat_template.jinja comes first. */
    write_file("chat_template.jinja", "from the file");
    text = render("[]", -1, -1, &e);
    CHECK(text && strcmp(text, "from the file") == 0, "chat_template.jinja before tokenizer_config.json");
    free(text);
    remove_file("chat_template.jinja");

    /* --chat-template-file: the given file before both, the special tokens
     * still tokenizer_config.json's; a missing one named. */
    write_file("chat_template.jinja", "from the file");
    char other[700];
    snprintf(other, sizeof other, "%.600s/other.jinja", dir);
    write_file("other.jinja", "other {{ bos_token }} {{ messages | length }}");
    write_file("tokenizer_config.json", "{\"bos_token\": \"<s>\", \"chat_template\": \"config\"}");
    ChatTemplate t;
    size_t len;
    JsonValue none = {.type = JSON_ARRAY};
    text = chat_template_load_file(&t, dir, other, &e) == 0 ? chat_template_render(&t, &none, NULL, false, NULL, &len, &e) : NULL;
    CHECK(text && strcmp(text, "other <s> 0") == 0 && strstr(t.source, "other.jinja"),
          "a template file replaces the checkpoint's, with its special tokens (%s)", text ? text : e.msg);
    free(text);
    chat_template_free(&t);
    snprintf(other, sizeof other, "%.600s/missing.jinja", dir);
    CHECK(chat_template_load_file(&t, dir, other, &e) != 0 && strstr(e.msg, "missing.jinja"), "a missing template file (%s)", e.msg);
    remove_file("chat_template.jinja");
    remove_file("other.jinja");

    /* Errors name the file. */
    write_file("tokenizer_config.json", "{\"chat_template\": \"{% for %}\"}");
    text = render("[]", -1, -1, &e);
    CHECK(!text && strstr(e.msg, "tokenizer_config.json: the chat template: template line 1"), "a syntax error (%s)", e.msg);
    write_file("tokenizer_config.json", "{\"chat_template\": \"{{ raise_exception('no system messages') }}\"}");
    text = render("[]", -1, -1, &e);
    CHECK(!text && strstr(e.msg, "no system messages"), "raise_exception's message (%s)", e.msg);
    write_file("tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
    text = render("[]", -1, -1, &e);
    CHECK(!text && strstr(e.msg, "no chat template"), "no template (%s)", e.msg);
    remove_file("tokenizer_config.json");
    text = render("[]", -1, -1, &e);
    CHECK(!text && strstr(e.msg, "no chat template"), "no tokenizer_config.json (%s)", e.msg);
}

/* A ChatML template written here, so that the expected texts are plain. */
static const char *chatml =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

static void expect_prompt(Chat *c, Tokenizer *t, int capacity, const char *want_text, int want_dropped, const char *what) {
    TokenIds got = {0}, want = {0};
    int dropped = -1;
    Error e;
    int rc = chat_prompt(c, capacity, &got, &dropped, &e);
    tokenizer_encode(t, want_text, strlen(want_text), ENCODE_ADDED_TOKENS, &want);
    CHECK(rc == 0 && got.n == want.n && memcmp(got.ids, want.ids, want.n * sizeof(int)) == 0 && dropped == want_dropped,
          "%s: the tokens of the expected text, %d messages dropped (got %d)", what, want_dropped, dropped);
    token_ids_free(&got);
    token_ids_free(&want);
}

static void test_conversation(Tokenizer *t) {
    write_file("chat_template.jinja", chatml);
    Chat c;
    Error e;
    CHECK(chat_init(&c, dir, NULL, t, "Be brief.", -1, &e) == 0, "chat_init");
    chat_add(&c, "user", "one");
    expect_prompt(&c, t, 4096,
                  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\none<|im_end|>\n<|im_start|>assistant\n", 0,
                  "the first turn");
    chat_add(&c, "assistant", "1");
    chat_add(&c, "user", "two");
    chat_add(&c, "assistant", "2");
    chat_add(&c, "user", "three");
    const char *all = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\none<|im_end|>\n<|im_start|>assistant\n"
                      "1<|im_end|>\n<|im_start|>user\ntwo<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n"
                      "<|im_start|>user\nthree<|im_end|>\n<|im_start|>assistant\n";
    expect_prompt(&c, t, 4096, all, 0, "three turns");
    /* Only room for the last turn: the two before go, the system message
     * stays. The smallest context that leaves an eighth for the reply. */
    const char *last = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nthree<|im_end|>\n<|im_start|>assistant\n";
    TokenIds ids = {0};
    tokenizer_encode(t, last, strlen(last), ENCODE_ADDED_TOKENS, &ids);
    int small = (int)ids.n;
    while (small - small / 8 < (int)ids.n) small++;
    expect_prompt(&c, t, small, last, 4, "a context too small for three turns");
    CHECK(c.n_messages == 2 && strcmp(c.messages[1].content, "three") == 0, "the dropped messages are gone");
    /* The last turn alone may fill the whole context (less room for the
     * reply than an eighth, but nothing older to drop); one more token is
     * too many. */
    expect_prompt(&c, t, (int)ids.n, last, 0, "the last turn alone, the whole context");
    int dropped;
    TokenIds more = {0};
    char want[128];
    snprintf(want, sizeof want, "a prompt of %zu tokens, longer than the context of %zu positions", ids.n, ids.n - 1);
    CHECK(chat_prompt(&c, (int)ids.n - 1, &more, &dropped, &e) == -1 && strstr(e.msg, want),
          "a last message that cannot fit (%s)", e.msg);
    token_ids_free(&more);
    chat_reset(&c);
    CHECK(c.n_messages == 1 && strcmp(c.messages[0].role, "system") == 0, "reset keeps the system message");
    token_ids_free(&ids);
    chat_free(&c);
    remove_file("chat_template.jinja");
}

/* OpenAI requests with tools, calls and their results (the request parsed
 * by api.c, rendered with its tools) against jinja2's renderings of what
 * transformers would be given (scripts/make_tools_golden.py). */
static void test_tools_golden(void) {
    JsonDoc doc;
    test_json(&doc, "templates/tools_golden.json");
    Error e;
    const JsonValue *cases = json_get(&doc.root, "cases");
    const GenerationConfig defaults = {.sampling = {.top_p = 1, .repeat_penalty = 1}, .max_new = -1};
    int outputs = 0;
    for (size_t i = 0; i < cases->len; i++) {
        const JsonValue *c = &cases->items[i], *tokens = json_get(c, "tokens"), *body = json_get(c, "body");
        const char *name = json_get(c, "name")->string;
        char path[600], *source;
        snprintf(path, sizeof path, "templates/%s", json_get(c, "template_file")->string);
        unsigned long n;
        source = test_data(path, &n);
        write_file("chat_template.jinja", source);
        free(source);
        Buf config = {0};
        buf_puts(&config, "{");
        for (size_t k = 0; k < tokens->len; k++) {
            buf_printf(&config, "%s\"%s\": ", k ? ", " : "", tokens->members[k].key);
            buf_json_string(&config, tokens->members[k].value.string, tokens->members[k].value.len);
        }
        buf_puts(&config, "}");
        write_file("tokenizer_config.json", config.data);
        buf_free(&config);
        ChatTemplate t;
        ApiRequest r;
        if (chat_template_load(&t, dir, &e) != 0 || api_parse_request(&r, API_CHAT, body->string, body->len, &defaults, &e) != 0) {
            CHECK(false, "%s: loads and parses (%s)", name, e.msg);
            continue;
        }
        size_t got_len;
        char *got = chat_template_render(&t, &r.messages, r.tools, true, r.template_kwargs, &got_len, &e);
        const JsonValue *want = json_get(c, "output");
        if (want) {
            outputs++;
            CHECK(got && got_len == want->len && memcmp(got, want->string, got_len) == 0, "%s: jinja2's text (got %s)", name,
                  got ? got : e.msg);
        } else {
            CHECK(!got && strstr(e.msg, json_get(json_get(c, "error"), "message")->string), "%s: fails as in jinja2 (%s)", name,
                  got ? "rendered" : e.msg);
        }
        free(got);
        api_request_free(&r);
        chat_template_free(&t);
    }
    CHECK(outputs >= 25, "%d renderings compared", outputs);
    json_free(&doc);
    remove_file("chat_template.jinja");
    remove_file("tokenizer_config.json");
}

int main(int argc, char **argv) {
    (void)argc;
    test_init(argv[0]);
    snprintf(dir, sizeof dir, "%.400s", test_scratch("work-chat"));
    test_template_sources();
    test_tools_golden();
    Error e;
    Tokenizer *t = tokenizer_load("tests/data/qwen2.5-tokenizer.json", &e);
    if (!t) die("%s", e.msg);
    test_conversation(t);
    tokenizer_free(t);
    return test_summary("test_chat");
}
