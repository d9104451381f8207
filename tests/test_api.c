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

int main(void) {
    test_fields();
    test_refusals();
    test_responses();
    return test_summary("test_api");
}
