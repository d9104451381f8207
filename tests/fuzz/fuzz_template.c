/* fuzz_template.c - libFuzzer target: the bytes as a chat template, parsed
 * and rendered with a small conversation (a system message, a tool call
 * and its result, <think> in an answer, tools). Whatever the template, the
 * render must end (within the limits of template.h) with text or with one
 * line of error, and leave nothing allocated. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../json.h"
#include "../../template.h"
#include "../../unicode.h"

static const char conversation[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Zürich? 😀\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nlook it up\\n</think>\\n\\n\", \"tool_calls\": ["
    "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"arguments\": {\"city\": \"Zürich\"}}}]},"
    "{\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 21.5}\"},"
    "{\"role\": \"assistant\", \"content\": \"21.5 °C\", \"reasoning_content\": null},"
    "{\"role\": \"user\", \"content\": \"\"}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}],"
    "\"add_generation_prompt\": true, \"enable_thinking\": false,"
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 1.5}";

static JsonDoc vars;

/* An error is one line of valid UTF-8. */
static void check_error(const Error *e) {
    size_t n = strlen(e->msg);
    assert(n > 0);
    for (size_t i = 0; i < n; i++) assert((unsigned char)e->msg[i] >= 0x20 && e->msg[i] != 0x7F);
    char *fixed;
    size_t fixed_len;
    assert(utf8_lossy(e->msg, n, &fixed, &fixed_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Error e;
    if (!vars.arena && json_parse(&vars, conversation, sizeof conversation - 1, &e) != 0) abort();
    Template *t = template_parse((const char *)data, size, &e);
    if (!t) {
        check_error(&e);
        return 0;
    }
    struct tm now = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 14, .tm_min = 5, .tm_sec = 9, .tm_wday = 5};
    size_t len;
    char *out = template_render(t, &vars.root, &now, &len, &e);
    if (out) {
        assert(len <= TEMPLATE_MAX_OUTPUT && out[len] == '\0');
        free(out);
    } else {
        check_error(&e);
    }
    template_free(t);
    return 0;
}
