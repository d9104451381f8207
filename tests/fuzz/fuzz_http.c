/* fuzz_http.c - libFuzzer target: the HTTP request head parser and the
 * chunked body decoder on arbitrary bytes, checking what http.h promises:
 * a complete head lies within the input and HTTP_MAX_HEAD, and the decoder
 * never writes past max_body nor consumes more than it was given - fed all
 * at once or one byte at a time, with the same outcome. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../http.h"

enum { MAX_BODY = 4096 };

/* Decodes in[0..n) in pieces of `step` bytes; returns the status. */
static int dechunk(const char *in, size_t n, size_t step, char *body, size_t *body_len, size_t *consumed) {
    HttpChunked c = {0};
    *body_len = *consumed = 0;
    int rc = HTTP_NEED_MORE;
    while (*consumed < n && rc == HTTP_NEED_MORE) {
        size_t piece = n - *consumed < step ? n - *consumed : step, used;
        rc = http_chunked_feed(&c, in + *consumed, piece, body, body_len, MAX_BODY, &used);
        assert(used <= piece && *body_len <= MAX_BODY);
        *consumed += used;
        if (rc == HTTP_NEED_MORE) assert(used == piece);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = (const char *)data;
    HttpRequest *r = malloc(sizeof *r);
    int rc = http_parse_head(r, in, size);
    assert(rc == 0 || rc == HTTP_NEED_MORE || rc == 400 || rc == 431 || rc == 501 || rc == 505);
    if (rc == 0) {
        assert(r->head_len <= size && r->head_len <= HTTP_MAX_HEAD);
        assert(r->path[0] == '/' && strlen(r->method) > 0);
        assert(!(r->chunked && r->content_length >= 0));
    }
    free(r);
    char *a = malloc(MAX_BODY + 1), *b = malloc(MAX_BODY + 1);
    size_t a_len, a_used, b_len, b_used;
    int whole = dechunk(in, size, size ? size : 1, a, &a_len, &a_used);
    int bytewise = dechunk(in, size, 1, b, &b_len, &b_used);
    assert(whole == bytewise && a_used == b_used);
    if (whole == 0) assert(a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a);
    free(b);
    return 0;
}
