/* fuzz_reply.c - libFuzzer target: a reply's text, cut into pieces where
 * the input's first bytes say, read by the reply parser for each tool
 * syntax and thinking start. The events of every feed must add up to the
 * parser's totals (content, reasoning, each call's arguments), every call
 * announced before its arguments, and the response and stream chunks
 * written from them must be JSON. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "../../api.h"
#include "../../reply.h"

/* Whether each "data: {...}" line of a stream is JSON. */
static void check_stream(const Buf *b) {
    for (const char *line = b->data; line && (line = strstr(line, "data: {"));) {
        const char *end = strstr(line, "\n\n");
        JsonDoc doc;
        Error e;
        assert(end && json_parse(&doc, line + 6, (size_t)(end - line - 6), &e) == 0);
        json_free(&doc);
        line = end;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    unsigned step = data[0] % 16 + 1, how = data[1];
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    ReplyParser p;
    reply_init(&p, (ToolSyntax)(how % 3), how & 4, (ThinkStart)(how / 8 % 3), how);
    ApiReply reply = {.kind = API_CHAT, .id = "x", .model = "m", .created = 0};
    Buf content = {0}, reasoning = {0}, stream = {0};
    Buf arguments[64] = {{0}};
    for (size_t at = 0; at <= len; at += step) {
        size_t n = at + step <= len ? step : len - at;
        if (at == len) reply_end(&p);
        else reply_feed(&p, text + at, n);
        for (int i = 0; i < p.n_events; i++) {
            const ReplyEvent *e = &p.events[i];
            if (e->kind == REPLY_CONTENT) buf_add(&content, e->text, e->len);
            if (e->kind == REPLY_REASONING) buf_add(&reasoning, e->text, e->len);
            if (e->kind == REPLY_CALL) assert(e->call == p.n_calls - 1 || e->call < p.n_calls);
            if (e->kind == REPLY_ARGUMENTS && e->call < 64) buf_add(&arguments[e->call], e->text, e->len);
            if (e->kind == REPLY_ARGUMENTS) assert(e->call < p.n_calls);
        }
        api_stream_events(&stream, &reply, &p, NULL);
        if (at == len) break;
    }
    assert(content.len == p.content.len && (!content.len || memcmp(content.data, p.content.data, content.len) == 0));
    assert(reasoning.len == p.reasoning.len && (!reasoning.len || memcmp(reasoning.data, p.reasoning.data, reasoning.len) == 0));
    for (int i = 0; i < p.n_calls && i < 64; i++)
        assert(arguments[i].len == p.calls[i].arguments.len &&
               (!arguments[i].len || memcmp(arguments[i].data, p.calls[i].arguments.data, arguments[i].len) == 0));
    check_stream(&stream);
    Buf whole = {0};
    ApiUsage usage = {0};
    api_chat_response(&whole, &reply, &p, NULL, STOP_EOS, &usage);
    JsonDoc doc;
    Error e;
    assert(json_parse(&doc, whole.data, whole.len, &e) == 0);
    json_free(&doc);
    buf_free(&whole), buf_free(&content), buf_free(&reasoning), buf_free(&stream);
    for (int i = 0; i < 64; i++) buf_free(&arguments[i]);
    reply_free(&p);
    return 0;
}
