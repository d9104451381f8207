/* tokenizer_parts.c - reading tokenizer.json's sections, and growable
 * bytes, for the tokenizer's parts. */
#include "tokenizer_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool json_is_string(const JsonValue *v, const char *s) {
    return v && v->type == JSON_STRING && v->len == strlen(s) && memcmp(v->string, s, v->len) == 0;
}

bool json_is_null(const JsonValue *v) { return !v || v->type == JSON_NULL; }

bool json_is_false(const JsonValue *v) { return json_is_null(v) || (v->type == JSON_BOOL && !v->boolean); }

bool json_is_empty_string(const JsonValue *v) { return json_is_null(v) || json_is_string(v, ""); }

const char *section_type(const JsonValue *section) {
    const JsonValue *type = json_get(section, "type");
    return !section ? "(missing)" : type && type->type == JSON_STRING ? type->string : "(no type)";
}

const char *sequence_types(const JsonValue *steps, char out[128]) {
    size_t n = (size_t)snprintf(out, 128, "Sequence[");
    for (size_t i = 0; steps && steps->type == JSON_ARRAY && i < steps->len && n < 128; i++)
        n += (size_t)snprintf(out + n, 128 - n, "%s%s", i ? ", " : "", section_type(&steps->items[i]));
    if (n < 128) snprintf(out + n, 128 - n, "]");
    return out;
}

const char *shown(const char *s, size_t n, char out[48]) {
    size_t cut = n <= 40 ? n : 40;
    while (cut < n && cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    for (size_t i = 0; i < cut; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7F ? '?' : s[i];
    strcpy(out + cut, cut < n ? "..." : "");
    return out;
}

void bytes_add(Bytes *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) b->text = xrealloc(b->text, b->cap = 2 * (b->len + n + 1), 1);
    if (n) memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

void bytes_free(Bytes *b) {
    free(b->text);
    *b = (Bytes){0};
}
