/* buf.h - a growable byte buffer, and the JSON literals written into it.
 *
 * The server builds every response, header and log line in one of these:
 * bytes are appended, the buffer grows as needed and stays NUL-terminated. */
#ifndef BUF_H
#define BUF_H

#include <stddef.h>

typedef struct {
    char *data;                /* NUL-terminated; NULL while empty */
    size_t len, cap;
} Buf;

void buf_add(Buf *b, const char *s, size_t n);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a JSON string literal; ill-formed UTF-8 becomes U+FFFD. */
void buf_json_string(Buf *b, const char *s, size_t n);
/* A float as JSON: finite, with enough digits to read back the same float. */
void buf_json_float(Buf *b, double x);
void buf_free(Buf *b);

#endif
