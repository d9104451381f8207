/* test_http.c - the HTTP request head parser and the chunked decoder, on
 * requests written by hand (RFC 9112's rules), whole and byte by byte. */
#include <stdlib.h>
#include <string.h>

#include "../http.h"
#include "test.h"

static HttpRequest request;

static int parse(const char *text) { return http_parse_head(&request, text, strlen(text)); }

static void test_heads(void) {
    const char *get = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\nNEXT";
    CHECK(parse(get) == 0, "a GET parses");
    CHECK(strcmp(request.method, "GET") == 0 && strcmp(request.path, "/v1/models") == 0, "method and path, query dropped");
    CHECK(request.head_len == strlen(get) - 4, "the head ends at its blank line");
    CHECK(request.keep_alive && request.content_length == -1 && !request.chunked, "HTTP/1.1 keeps the connection");
    CHECK(strcmp(request.authorization, "Bearer k") == 0, "the Authorization header");
    CHECK(request.origin[0] == '\0', "no Origin header: empty");
    CHECK(parse("OPTIONS /v1/models HTTP/1.1\r\norigin:  https://a.example \r\n\r\n") == 0 &&
              strcmp(request.method, "OPTIONS") == 0 && strcmp(request.origin, "https://a.example") == 0,
          "the Origin header (name in any case, value trimmed)");
    CHECK(parse("POST / HTTP/1.0\nContent-Length:  12 \n\n") == 0 && request.content_length == 12 && !request.keep_alive,
          "bare LF lines, HTTP/1.0 closes, Content-Length with spaces");
    CHECK(parse("POST / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n") == 0 && !request.keep_alive, "Connection: close");
    CHECK(parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: Chunked\r\n\r\n") == 0 &&
              request.chunked && request.expect_continue, "chunked, Expect: 100-continue");
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\n") == HTTP_NEED_MORE, "no blank line yet: more is needed");
    CHECK(parse("") == HTTP_NEED_MORE, "nothing yet: more is needed");

    const char *bad[] = {
        "GET  / HTTP/1.1\r\n\r\n",                     /* two spaces */
        "GET x HTTP/1.1\r\n\r\n",                       /* not a path */
        "GET / HTTP/1.1\r\n folded: x\r\n\r\n",        /* obs-fold */
        "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET / HTTP/1.1\r\nBad\rCR: x\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "GET / HTTX/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(parse(bad[i]) == 400, "refused with 400: %s", bad[i]);
    CHECK(parse("GET / HTTP/2.0\r\n\r\n") == 505, "HTTP/2.0: 505");
    CHECK(parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n") == 501, "another transfer coding: 501");
    char *big = malloc(HTTP_MAX_HEAD + 100);
    memset(big, 'a', HTTP_MAX_HEAD + 99);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    big[HTTP_MAX_HEAD + 99] = '\0';
    CHECK(parse(big) == 431, "16 KiB of head without its end: 431");
    free(big);
}

/* Decodes text whole, then byte by byte; both must give want (status 0) or status. */
static void chunked(const char *text, int status, const char *want, size_t max_body) {
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        HttpChunked c = {0};
        char body[256];
        size_t len = 0, at = 0, n = strlen(text), used;
        int rc = HTTP_NEED_MORE;
        while (at < n && rc == HTTP_NEED_MORE) {
            rc = http_chunked_feed(&c, text + at, bytewise ? 1 : n - at, body, &len, max_body, &used);
            at += used;
        }
        CHECK(rc == status, "chunked %s%s: status %d, expected %d", text, bytewise ? " (byte by byte)" : "", rc, status);
        if (status == 0) {
            CHECK(len == strlen(want) && memcmp(body, want, len) == 0, "chunked %s: the body", text);
            CHECK(strcmp(text + at, "NEXT") == 0, "chunked %s: stops at the body's end", text);
        }
    }
}

static void test_chunked(void) {
    chunked("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT", 0, "hello world", 100);
    chunked("A;name=v\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT", 0, "0123456789", 100);
    chunked("3\nabc\n0\n\nNEXT", 0, "abc", 100);
    chunked("0\r\n\r\nNEXT", 0, "", 100);
    chunked("5\r\nhello\r\n0\r\n", HTTP_NEED_MORE, NULL, 100);
    chunked("zz\r\n", 400, NULL, 100);
    chunked("\r\n", 400, NULL, 100);
    chunked("5\r\nhelloXX", 400, NULL, 100);
    chunked("1000000000000000\r\n", 400, NULL, 100);
    chunked("b\r\nhello world\r\n", 413, NULL, 10);
    chunked("5\r\nhello\r\n6\r\n", 413, NULL, 10);
}

int main(void) {
    test_heads();
    test_chunked();
    CHECK(strcmp(http_reason(413), "Content Too Large") == 0, "a reason phrase");
    return test_summary("test_http");
}
