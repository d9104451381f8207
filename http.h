/* http.h - reading HTTP/1.1 requests (RFC 9112) from untrusted bytes.
 *
 * Two pure parsers with no I/O, so that they can be fuzzed: the request
 * line and headers, parsed again from the start as bytes come in (they are
 * at most HTTP_MAX_HEAD bytes), and a chunked body, decoded incrementally.
 * Anything ambiguous that could smuggle a request past a proxy (both
 * Content-Length and Transfer-Encoding, two different lengths, folded
 * header lines) is refused rather than guessed at. */
#ifndef HTTP_H
#define HTTP_H

#include <stdbool.h>
#include <stddef.h>

enum {
    HTTP_MAX_HEAD = 16384,     /* request line and headers, blank line included */
    HTTP_MAX_TOKEN = 512,      /* bytes of an Authorization header kept */
    HTTP_NEED_MORE = 1,        /* a parser's "not complete yet" */
};

typedef struct {
    char method[16];           /* "GET", "POST", ... */
    char path[HTTP_MAX_HEAD];  /* the target without its query string */
    int minor_version;         /* HTTP/1.0 or HTTP/1.1 */
    long long content_length;  /* -1 when absent */
    bool chunked;              /* Transfer-Encoding: chunked */
    bool keep_alive;           /* the connection stays open after the response */
    bool expect_continue;      /* Expect: 100-continue */
    char authorization[HTTP_MAX_TOKEN]; /* the Authorization header's value, or "" */
    bool authorization_too_long;
    char origin[HTTP_MAX_TOKEN]; /* the Origin header's value (CORS), or "" (also when too long) */
    size_t head_len;           /* bytes of the request line and headers */
} HttpRequest;

/* Parses the request head at the start of buf[0..len). Returns 0 when it
 * is complete (r filled, r->head_len its length), HTTP_NEED_MORE when the
 * blank line has not come yet, or the status of the error: 400 (malformed),
 * 431 (longer than HTTP_MAX_HEAD), 501 (a transfer coding other than
 * chunked), 505 (not HTTP/1.0 or 1.1). */
int http_parse_head(HttpRequest *r, const char *buf, size_t len);

/* A chunked body being decoded; start it zeroed. */
typedef struct {
    int state;
    unsigned long long chunk_left; /* bytes left in the current chunk */
    int size_digits;
    int line_bytes;            /* bytes of a chunk-size or trailer line so far */
} HttpChunked;

/* Decodes in[0..n) onto body[*body_len..] (at most max_body bytes of body
 * in all). Sets *used to the bytes of in consumed. Returns 0 when the body
 * is complete (the bytes after it are the next request's), HTTP_NEED_MORE
 * when all of in was consumed and more must come, 400 when malformed, 413
 * when the body would exceed max_body. */
int http_chunked_feed(HttpChunked *c, const char *in, size_t n, char *body, size_t *body_len, size_t max_body,
                      size_t *used);

/* The reason phrase of a status: "OK", "Not Found", ... */
const char *http_reason(int status);

#endif
