/* test_api.c - request bodies to generation settings (every field, every
 * refusal), and the response objects read back as JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../api.h"
#include "test.h"

static const GenerationConfig defaults = {
    .sampling = {.temperature = 0, .top_k = 50, .top_p = 1, .min_p = 0, .repeat_penalty = 1, .seed = 9},
    .max_new = -1};

static void test_fields(void) {
    const char *body =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],\"max_tokens\":5,"
        "\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":3,\"min_p\":0.1,\"repetition_penalty\":1.2,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"seed\":-1,\"stop\":[\"x\",\"yz\"],\"logprobs\":true,"
        "\"top_logprobs\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"n\":1,\"model\":\"any\"}";
    ApiRequest r;
    Error e;
    CHECK(api_parse_request(&r, API_CHAT, body, strlen(body), &defaults, &e) == 0, "every field: accepted");
    const SamplerConfig *s = &r.generation.sampling;
    CHECK(s->temperature == 0.5 && s->top_p == 0.9 && s->top_k == 3 && s->min_p == 0.1 && s->repeat_penalty == 1.2 &&
              s->presence_penalty == 0.5 && s->frequency_penalty == -0.5, "the sampling settings");
    CHECK(r.seed_given && s->seed == UINT64_MAX, "seed -1 as 64 bits");
    CHECK(r.generation.max_new == 7, "max_completion_tokens wins over max_tokens");
    CHECK(r.n_stops == 2 && strcmp(r.stops[1], "yz") == 0, "stop strings");
    CHECK(r.logprobs == 4 && r.stream && r.include_usage, "logprobs, stream, include_usage");
    CHECK(r.messages.len == 3, "three messages");
    const JsonValue *content = json_get(&r.messages.items[1], "content");
    CHECK(content && strcmp(content->string, "ab") == 0, "text parts joined");
    content = json_get(&r.messages.items[2], "content");
    CHECK(content && strcmp(content->string, "") == 0, "a null assistant content is empty");
    api_request_free(&r);

    const char *plain = "{\"prompt\":\"hi\",\"logprobs\":2,\"stop\":\"\\n\"}";
    CHECK(api_parse_request(&r, API_COMPLETION, plain, strlen(plain), &defaults, &e) == 0 && strcmp(r.prompt, "hi") == 0 &&
              r.logprobs == 2 && r.n_stops == 1 && !r.seed_given && r.generation.sampling.seed == 9 &&
              r.generation.max_new == -1 && r.generation.sampling.top_k == 50,
          "a completion: the prompt, and the defaults where the body says nothing");
    api_request_free(&r);
    /* vLLM's top_k -1 is off (0 here); max_tokens -1 is no limit, 0 the prompt only. */
    for (int limit = -1; limit <= 0; limit++) {
        char body[128];
        snprintf(body, sizeof body, "{\"prompt\":\"hi\",\"top_k\":-1,\"max_tokens\":%d}", limit);
        CHECK(api_parse_request(&r, API_COMPLETION, body, strlen(body), &defaults, &e) == 0 &&
                  r.generation.sampling.top_k == 0 && r.generation.max_new == limit,
              "top_k -1: off; max_tokens %d taken as it is", limit);
        api_request_free(&r);
    }
    const char *ids = "{\"prompt\":[[9707,11,0]]}";
    CHECK(api_parse_request(&r, API_COMPLETION, ids, strlen(ids), &defaults, &e) == 0 && !r.prompt && r.prompt_ids &&
              r.prompt_ids->len == 3 && r.prompt_ids->items[0].number.value == 9707,
          "a completion's prompt as token ids, inside an array of one");
    api_request_free(&r);
    const char *one = "{\"prompt\":[\"hi\"]}";
    CHECK(api_parse_request(&r, API_COMPLETION, one, strlen(one), &defaults, &e) == 0 && strcmp(r.prompt, "hi") == 0,
          "a completion's prompt as an array of one string");
    api_request_free(&r);
}

static void refused(ApiKind kind, const char *body, const char *want) {
    ApiRequest r;
    Error e = {{0}};
    int rc = api_parse_request(&r, kind, body, strlen(body), &defaults, &e);
    CHECK(rc == -1 && strstr(e.msg, want), "%s: refused with '%s' (got '%s')", body, want, e.msg);
    if (rc == 0) api_request_free(&r);
}

static void test_refusals(void) {
    refused(API_CHAT, "{\"messages\":", "not JSON");
    refused(API_CHAT, "[]", "JSON object");
    refused(API_CHAT, "{}", "'messages'");
    refused(API_CHAT, "{\"messages\":[]}", "must not be empty");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "unknown role");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "content is missing");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "content[0]");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", "'n' must be 1");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-2}", "must be -1 (until an end token");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1e20}",
            "'seed' must be in [-9223372036854775808, 9223372036854775807]");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":0.5}", "'seed' must be an integer, not a fraction");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":-2}", "'top_k' must be in [-1,");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "'temperature' must be a number");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":2.5}", "'top_k' must be an integer");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}", "top-p");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "needs 'logprobs'");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}", "[0, 20]");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "at most 4");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"\"]}", "non-empty");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":3}", "'stream_options'");
    refused(API_COMPLETION, "{\"prompt\":[1,2.5]}", "'prompt' must be a string or an array of token ids");
    refused(API_COMPLETION, "{\"prompt\":[1,-2]}", "'prompt' must be a string or an array of token ids");
    refused(API_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "one prompt only");
    refused(API_COMPLETION, "{\"prompt\":[[1],[2]]}", "one prompt only");
    refused(API_COMPLETION, "{\"prompt\":{}}", "'prompt' must be a string or an array of token ids");
    refused(API_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "'logprobs' must be an integer");
}

static void test_responses(void) {
    Buf b = {0};
    api_error(&b, 413, "too big");
    CHECK(strcmp(b.data, "{\"error\":{\"message\":\"too big\",\"type\":\"invalid_request_error\",\"code\":413}}") == 0, "an error object");
    buf_free(&b);
    ApiReply reply = {.kind = API_CHAT, .id = "chatcmpl-1", .model = "m", .created = 5};
    ApiUsage usage = {.prompt_tokens = 3, .cached_tokens = 2, .completion_tokens = 4};
    api_response(&b, &reply, "hi", 2, NULL, STOP_EOS, &usage);
    JsonDoc doc;
    Error e;
    CHECK(json_parse(&doc, b.data, b.len, &e) == 0, "a response is JSON");
    const JsonValue *choice = &json_get(&doc.root, "choices")->items[0];
    CHECK(strcmp(json_get(json_get(choice, "message"), "content")->string, "hi") == 0 &&
              strcmp(json_get(choice, "finish_reason")->string, "stop") == 0,
          "the message and finish_reason");
    const JsonValue *u = json_get(&doc.root, "usage");
    CHECK(json_get(u, "total_tokens")->number.integer == 7 &&
              json_get(json_get(u, "prompt_tokens_details"), "cached_tokens")->number.integer == 2, "the usage");
    json_free(&doc);
    buf_free(&b);
    api_stream_end(&b, &reply, api_finish_reason(STOP_LENGTH, false), &usage);
    CHECK(strstr(b.data, "\"finish_reason\":\"length\"") && strstr(b.data, "\"choices\":[],\"usage\"") &&
              strcmp(b.data + b.len - 14, "data: [DONE]\n\n") == 0, "the stream's end: finish_reason, usage, [DONE]");
    buf_free(&b);
}

/* Tools, tool_choice, response_format, logit_bias, reasoning_format, and a
 * history of calls and their results as the template will see it. */
static void test_agent_fields(void) {
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\",\"name\":\"ann\"},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"hm\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": [1, 2]}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":[{\"type\":\"text\",\"text\":\"sunny\"}]}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"
        "{\"type\":\"object\"},\"strict\":true,\"x-extra\":1}}],\"tool_choice\":{\"type\":\"function\",\"function\":"
        "{\"name\":\"get_weather\"}},\"parallel_tool_calls\":false,\"response_format\":{\"type\":\"json_schema\","
        "\"json_schema\":{\"name\":\"a\",\"strict\":true,\"schema\":{\"type\":\"object\"}}},\"logit_bias\":{\"5\":-100,\"3\":2.5,"
        "\"5\":1},\"reasoning_format\":\"none\",\"user\":\"u\",\"store\":false,\"metadata\":{\"k\":\"v\"}}";
    ApiRequest r;
    Error e;
    CHECK(api_parse_request(&r, API_CHAT, body, strlen(body), &defaults, &e) == 0, "agent fields: accepted (%s)", e.msg);
    CHECK(r.tools && r.tools->len == 1 && r.tool_choice == API_TOOLS_NAMED && strcmp(r.tool_name, "get_weather") == 0 &&
              !r.parallel_tool_calls,
          "tools, a named tool_choice, parallel_tool_calls");
    CHECK(r.format == API_FORMAT_JSON_SCHEMA && r.schema && r.schema->type == JSON_OBJECT && r.reasoning_inline,
          "response_format json_schema, reasoning_format none");
    CHECK(r.n_bias == 2 && r.bias[0].id == 3 && r.bias[0].bias == 2.5f && r.bias[1].id == 5 && r.bias[1].bias == 1 &&
              r.generation.sampling.bias == r.bias && r.generation.sampling.n_bias == 2,
          "logit_bias by id, the last of a repeated id winning");
    const JsonValue *user = &r.messages.items[0], *assistant = &r.messages.items[1], *tool = &r.messages.items[2];
    CHECK(strcmp(json_get(user, "name")->string, "ann") == 0, "a message's name is passed on");
    const JsonValue *call = &json_get(assistant, "tool_calls")->items[0], *args = json_get(json_get(call, "function"), "arguments");
    CHECK(strcmp(json_get(assistant, "content")->string, "") == 0 && strcmp(json_get(assistant, "reasoning_content")->string, "hm") == 0,
          "the assistant's null content is empty; its reasoning_content passed on");
    CHECK(args->type == JSON_OBJECT && strcmp(json_get(args, "city")->string, "Paris") == 0 && json_get(args, "days")->len == 2 &&
              strcmp(json_get(call, "id")->string, "call_1") == 0 && strcmp(json_get(call, "type")->string, "function") == 0,
          "a call's arguments parsed from their JSON text into an object");
    CHECK(strcmp(json_get(tool, "role")->string, "tool") == 0 && strcmp(json_get(tool, "content")->string, "sunny") == 0 &&
              strcmp(json_get(tool, "tool_call_id")->string, "call_1") == 0,
          "a tool's message: its content joined, its tool_call_id");
    api_request_free(&r);

    /* The defaults: auto with tools, none without; parallel calls allowed. */
    const char *plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";
    CHECK(api_parse_request(&r, API_CHAT, plain, strlen(plain), &defaults, &e) == 0 && r.tool_choice == API_TOOLS_AUTO &&
              r.parallel_tool_calls && r.format == API_FORMAT_TEXT && !r.reasoning_inline,
          "tools alone: tool_choice auto, parallel calls");
    api_request_free(&r);
    const char *none = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"},"
                       "\"tool_choice\":\"none\"}";
    CHECK(api_parse_request(&r, API_CHAT, none, strlen(none), &defaults, &e) == 0 && r.tool_choice == API_TOOLS_NONE &&
              r.format == API_FORMAT_JSON_OBJECT,
          "json_object, tool_choice none without tools");
    api_request_free(&r);
    const char *completion = "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"integer\"},\"logit_bias\":{\"7\":100},\"echo\":false}";
    CHECK(api_parse_request(&r, API_COMPLETION, completion, strlen(completion), &defaults, &e) == 0 &&
              r.format == API_FORMAT_JSON_SCHEMA && r.n_bias == 1 && r.bias[0].bias == 100,
          "a completion: llama.cpp's json_schema, logit_bias, echo false");
    api_request_free(&r);
}

#define CHAT(rest) "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]" rest "}"
#define TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"

static void test_agent_refusals(void) {
    refused(API_CHAT, CHAT(",\"functions\":[]"), "'functions' is not supported");
    refused(API_CHAT, CHAT(",\"stream_options\":{\"include_obfuscation\":true}"), "stream_options: 'include_obfuscation' is not supported");
    refused(API_CHAT, CHAT(",\"reasoning_effort\":\"low\""), "'reasoning_effort' is not supported");
    refused(API_CHAT, CHAT(",\"audio\":{}"), "'audio' is not supported");
    refused(API_CHAT, CHAT(",\"modalities\":[\"text\",\"audio\"]"), "'modalities' must be [\"text\"]");
    refused(API_CHAT, CHAT(",\"mirostat\":2"), "'mirostat' is not supported");
    refused(API_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "'echo' is not supported");
    refused(API_COMPLETION, "{\"prompt\":\"x\",\"best_of\":2}", "'best_of' must be 1");
    refused(API_COMPLETION, "{\"prompt\":\"x\",\"suffix\":\"y\"}", "'suffix' is not supported");
    refused(API_COMPLETION, "{\"prompt\":\"x\",\"tools\":[]}", "'tools' is not supported");
    refused(API_CHAT, CHAT(",\"tools\":[]"), "non-empty list");
    refused(API_CHAT, CHAT(",\"tools\":[{\"type\":\"custom\",\"custom\":{}}]"), "no other kind of tool");
    refused(API_CHAT, CHAT(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]"), "1 to 64 letters");
    refused(API_CHAT, CHAT(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]"), "JSON Schema object");
    refused(API_CHAT, CHAT(",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"),
            "given twice");
    refused(API_CHAT, CHAT(",\"tool_choice\":\"required\""), "needs 'tools'");
    refused(API_CHAT, CHAT("," TOOLS ",\"tool_choice\":\"always\""), "'tool_choice' must be");
    refused(API_CHAT, CHAT("," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}"), "which 'tools' does not list");
    refused(API_CHAT, CHAT(",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}"), "which 'tools' does not list");
    refused(API_CHAT, CHAT("," TOOLS ",\"parallel_tool_calls\":1"), "'parallel_tool_calls' must be a boolean");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"xml\"}"), "'response_format' must be");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"json_schema\"}"), "'response_format' must be");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{},\"extra\":1}}"),
            "response_format.json_schema: 'extra' is not supported");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":3}}"), "must be a JSON Schema");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"json_object\"},\"json_schema\":{}"), "one of 'response_format' and 'json_schema'");
    refused(API_CHAT, CHAT(",\"response_format\":{\"type\":\"json_object\"},\"grammar\":\"root ::= \\\"a\\\"\""), "one of 'grammar' and");
    refused(API_CHAT, CHAT("," TOOLS ",\"grammar\":\"root ::= \\\"a\\\"\""), "'grammar' and tool calls cannot be combined");
    refused(API_CHAT, CHAT(",\"logit_bias\":{\"-1\":1}"), "keys must be token ids");
    refused(API_CHAT, CHAT(",\"logit_bias\":{\"1\":101}"), "[-100, 100]");
    refused(API_CHAT, CHAT(",\"logit_bias\":[1]"), "'logit_bias' must be an object");
    refused(API_CHAT, CHAT(",\"reasoning_format\":\"deepseek-legacy\""), "'reasoning_format' must be");
    ApiEmbedRequest embed;
    Error e = {{0}};
    const char *extra = "{\"input\":\"a\",\"truncate\":true}";
    CHECK(api_parse_embeddings(&embed, extra, strlen(extra), &e) == -1 && strstr(e.msg, "'truncate' is not supported"),
          "embeddings: a field not read is refused, named (%s)", e.msg);
    refused(API_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "tool_call_id is missing");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_call_id\":\"a\"}]}", "only a tool's message has tool_call_id");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", "only an assistant's message has tool_calls");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"audio\":{}}]}", "messages[0]: 'audio' is not supported");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"refusal\":\"no\"}]}", "refusal");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":"
                      "{\"name\":\"f\",\"arguments\":\"{oops\"}}]}]}",
            "messages[0].tool_calls[0].function.arguments is not JSON");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
            "arguments must be a string");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"code\",\"function\":{\"name\":\"f\","
                      "\"arguments\":\"{}\"}}]}]}",
            "type must be \"function\"");
}

/* A chat's response and stream as the reply parser read the text. */
static void test_chat_output(void) {
    ApiReply reply = {.kind = API_CHAT, .id = "chatcmpl-1", .model = "m", .created = 5};
    ApiUsage usage = {.prompt_tokens = 3, .completion_tokens = 4};
    ReplyParser p;
    reply_init(&p, TOOL_SYNTAX_QWEN, true, THINK_MAY, 1);
    Buf stream = {0};
    const char *pieces[] = {"<think>\nHm.\n</think>\n\n", "<tool_call>\n{\"name\": \"f\", \"argu", "ments\": {\"a\": \"\\\"q\"}}\n</tool_call>"};
    for (int i = 0; i < 3; i++) {
        reply_feed(&p, pieces[i], strlen(pieces[i]));
        api_stream_events(&stream, &reply, &p, NULL);
    }
    reply_end(&p);
    api_stream_events(&stream, &reply, &p, NULL);
    api_stream_end(&stream, &reply, api_finish_reason(STOP_EOS, p.n_calls > 0), NULL);
    /* Every chunk is JSON; the deltas add up to the message. */
    Buf reasoning = {0}, arguments = {0};
    int chunks = 0, named = 0;
    const char *finish = NULL;
    for (char *line = stream.data; line && (line = strstr(line, "data: ")); line += 6) {
        if (strncmp(line, "data: [DONE]", 12) == 0) break;
        char *end = strstr(line, "\n\n");
        JsonDoc doc;
        Error e;
        if (json_parse(&doc, line + 6, (size_t)(end - line - 6), &e) != 0) {
            CHECK(false, "a chunk is JSON (%s)", e.msg);
            break;
        }
        chunks++;
        const JsonValue *choice = &json_get(&doc.root, "choices")->items[0], *delta = json_get(choice, "delta");
        const JsonValue *r = json_get(delta, "reasoning_content"), *calls = json_get(delta, "tool_calls");
        if (r) buf_add(&reasoning, r->string, r->len);
        if (calls) {
            const JsonValue *c = &calls->items[0], *f = json_get(c, "function");
            if (json_get(f, "name")) named += json_get(c, "index")->number.integer == 0 && json_get(c, "id") &&
                                            strcmp(json_get(f, "name")->string, "f") == 0 &&
                                            strcmp(json_get(c, "type")->string, "function") == 0;
            buf_add(&arguments, json_get(f, "arguments")->string, json_get(f, "arguments")->len);
        }
        if (json_get(choice, "finish_reason")->type == JSON_STRING) finish = json_get(choice, "finish_reason")->string;
        CHECK(!json_get(delta, "content") || json_get(delta, "content")->len == 0, "no content in this reply's deltas");
        json_free(&doc);
    }
    CHECK(chunks >= 4 && named == 1 && reasoning.data && strcmp(reasoning.data, "Hm.") == 0 && arguments.data &&
              strcmp(arguments.data, "{\"a\": \"\\\"q\"}") == 0 && finish && strcmp(finish, "tool_calls") == 0,
          "streamed: reasoning 'Hm.', one call announced with index, id, type and name, its arguments in pieces, "
          "finish_reason tool_calls (%d chunks)", chunks);
    buf_free(&reasoning), buf_free(&arguments), buf_free(&stream);

    Buf b = {0};
    api_chat_response(&b, &reply, &p, NULL, STOP_EOS, &usage);
    JsonDoc doc;
    Error e;
    CHECK(json_parse(&doc, b.data, b.len, &e) == 0, "the response is JSON");
    const JsonValue *choice = &json_get(&doc.root, "choices")->items[0], *message = json_get(choice, "message");
    const JsonValue *call = &json_get(message, "tool_calls")->items[0];
    CHECK(json_get(message, "content")->type == JSON_NULL && strcmp(json_get(message, "reasoning_content")->string, "Hm.") == 0 &&
              strcmp(json_get(json_get(call, "function"), "arguments")->string, "{\"a\": \"\\\"q\"}") == 0 &&
              strncmp(json_get(call, "id")->string, "call_", 5) == 0 &&
              strcmp(json_get(choice, "finish_reason")->string, "tool_calls") == 0,
          "whole: content null, reasoning_content, the call, finish_reason tool_calls");
    json_free(&doc);
    buf_free(&b);
    api_chat_response(&b, &reply, &p, NULL, STOP_LENGTH, &usage);
    CHECK(strstr(b.data, "\"finish_reason\":\"length\""), "calls cut short by the length limit: finish_reason length");
    buf_free(&b);
    reply_free(&p);
    reply_init(&p, TOOL_SYNTAX_NONE, true, THINK_NONE, 1);
    reply_feed(&p, "Hi", 2);
    reply_end(&p);
    api_chat_response(&b, &reply, &p, NULL, STOP_EOS, &usage);
    CHECK(strstr(b.data, "\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"}") != NULL,
          "plain text: content only, no reasoning_content or tool_calls (%s)", b.data);
    buf_free(&b);
    reply_free(&p);
}

int main(void) {
    test_fields();
    test_refusals();
    test_responses();
    test_agent_fields();
    test_agent_refusals();
    test_chat_output();
    return test_summary("test_api");
}
