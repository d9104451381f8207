/* fuzz_api.c - libFuzzer target: a request body, as a chat completion and
 * as a completion, turned into generation settings and the reply's grammar,
 * and as an embeddings request. A body that is accepted must give settings
 * the sampler accepts, a length limit of 0 or more (or none), at most
 * MAX_STOP_STRINGS non-empty stop strings, messages whose roles and
 * contents are strings, a logit bias sorted by id, and a grammar that
 * compiles or a reason why not; as embeddings, 1 to API_MAX_EMBED_INPUTS
 * inputs, each a string or a non-empty list of token ids; a refused one
 * must say why and leave nothing to free. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../grammar.h"
#include "../../tools.h"

static void walk(const ApiRequest *r) {
    Error e;
    assert(sampler_check_config(&r->generation.sampling, &e) == 0);
    assert(r->generation.max_new >= -1);  /* -1: no limit; 0: the prompt only */
    assert(r->n_stops >= 0 && r->n_stops <= MAX_STOP_STRINGS);
    for (int i = 0; i < r->n_stops; i++) assert(strlen(r->stops[i]) > 0);
    assert(r->logprobs >= -1 && r->logprobs <= MAX_TOP_LOGPROBS);
    for (int i = 1; i < r->n_bias; i++) assert(r->bias[i - 1].id < r->bias[i].id);
    assert(r->generation.sampling.n_bias == r->n_bias);
    /* The grammar of the reply, for a template of each tool syntax: its
     * text compiles (a user's GBNF may not), or the reason is given. */
    for (int syntax = TOOL_SYNTAX_NONE; syntax <= TOOL_SYNTAX_LLAMA3; syntax++) {
        TemplateCaps caps = {.tools = syntax != TOOL_SYNTAX_NONE, .syntax = (ToolSyntax)syntax, .thinking = true};
        ReplyGrammar g;
        Error e = {{0}};
        if (reply_grammar(&g, r, &caps, syntax == TOOL_SYNTAX_QWEN ? THINK_MAY : THINK_NONE, &e) != 0) {
            assert(e.msg[0] != '\0');
            continue;
        }
        Grammar *grammar = g.gbnf ? grammar_new(g.gbnf, strlen(g.gbnf), &e) : NULL;
        assert(grammar || !g.gbnf || r->grammar);
        grammar_free(grammar);
        free(g.gbnf);
    }
    if (r->kind == API_COMPLETION) {
        assert(r->prompt != NULL || r->prompt_ids != NULL);
        return;
    }
    assert(r->messages.type == JSON_ARRAY && r->messages.len > 0);
    for (size_t i = 0; i < r->messages.len; i++) {
        const JsonValue *role = json_get(&r->messages.items[i], "role"), *content = json_get(&r->messages.items[i], "content");
        assert(role && role->type == JSON_STRING && content && content->type == JSON_STRING);
        assert(strlen(content->string) == content->len || memchr(content->string, 0, content->len));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GenerationConfig defaults = {.sampling = {.temperature = 0, .top_k = 50, .top_p = 1, .min_p = 0, .repeat_penalty = 1},
                                 .max_new = -1};
    for (int kind = API_CHAT; kind <= API_COMPLETION; kind++) {
        ApiRequest r;
        Error e = {{0}};
        if (api_parse_request(&r, (ApiKind)kind, (const char *)data, size, &defaults, &e) != 0) {
            assert(e.msg[0] != '\0' && r.doc.arena == NULL && r.owned == NULL && r.bias == NULL);
            continue;
        }
        walk(&r);
        /* The response writers take whatever text the reply holds. */
        Buf b = {0};
        ApiReply reply = {.kind = (ApiKind)kind, .id = "x", .model = "m", .created = 0};
        ApiUsage usage = {0};
        api_response(&b, &reply, (const char *)data, size, NULL, STOP_LENGTH, &usage);
        api_stream_text(&b, &reply, (const char *)data, size, NULL);
        buf_free(&b);
        api_request_free(&r);
    }
    ApiEmbedRequest r;
    Error e = {{0}};
    if (api_parse_embeddings(&r, (const char *)data, size, &e) != 0) {
        assert(e.msg[0] != '\0' && r.doc.arena == NULL && r.inputs == NULL);
        return 0;
    }
    assert(r.n_inputs >= 1 && r.n_inputs <= API_MAX_EMBED_INPUTS && r.dimensions >= 0);
    for (int i = 0; i < r.n_inputs; i++) {
        const ApiEmbedInput *in = &r.inputs[i];
        assert((in->text != NULL) != (in->ids != NULL));
        for (size_t k = 0; in->ids && k < in->ids->len; k++)
            assert(in->ids->len > 0 && in->ids->items[k].type == JSON_NUMBER && in->ids->items[k].number.value >= 0);
    }
    const float vectors[3] = {0.5f, -1.0f / 3, 0};
    Buf b = {0};
    api_embeddings_response(&b, "m", vectors, 1, 3, r.base64, 1);
    buf_free(&b);
    api_embed_request_free(&r);
    return 0;
}
