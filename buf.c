/* buf.c - a growable byte buffer and JSON literals. */
#include "buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void buf_reserve(Buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    b->data = xrealloc(b->data, cap, 1);
    b->cap = cap;
}

void buf_add(Buf *b, const char *s, size_t n) {
    buf_reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void buf_free(Buf *b) {
    free(b->data);
    *b = (Buf){0};
}

/* The length of the well-formed UTF-8 character at s[0..n), or 0. */
static size_t utf8_length(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
                 s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    /* Overlong three- and four-byte forms, surrogates, and past U+10FFFF. */
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

void buf_json_string(Buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    buf_add(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char ch = u[i];
        if (ch == '"' || ch == '\\') buf_add(b, "\\", 1), buf_add(b, s + i, 1), i++;
        else if (ch == '\n') buf_add(b, "\\n", 2), i++;
        else if (ch == '\r') buf_add(b, "\\r", 2), i++;
        else if (ch == '\t') buf_add(b, "\\t", 2), i++;
        else if (ch < 0x20 || ch == 0x7f) buf_printf(b, "\\u%04x", ch), i++;
        else {
            size_t len = utf8_length(u + i, n - i);
            if (len) buf_add(b, s + i, len), i += len;
            else buf_add(b, "\\ufffd", 6), i++;
        }
    }
    buf_add(b, "\"", 1);
}

void buf_json_float(Buf *b, double x) {
    if (isnan(x)) x = 0;
    if (isinf(x)) x = x > 0 ? 3.4e38 : -3.4e38;
    buf_printf(b, "%.9g", x);
}
