/* decoder.c - tokenizer.json's decoder: reading its steps, and running
 * them on a list of tokens. */
#define _GNU_SOURCE /* memmem() */
#include "decoder.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"
#include "unicode.h"

/* ---- reading the steps ---- */

/* A string member of a step that must be there. */
static const JsonValue *string_of(const JsonValue *v, const JsonValue *member, const char *name, Error *e) {
    if (member && member->type == JSON_STRING && member->len > 0) return member;
    fail(e, "decoder %s has no \"%s\" that is a non-empty string", section_type(v), name);
    return NULL;
}

/* A count of Strip's. */
static int count_of(const JsonValue *v, const char *name, size_t *out, Error *e) {
    const JsonValue *n = json_get(v, name);
    if (json_is_null(n)) return *out = 0, 0;
    if (n->type != JSON_NUMBER || !n->number.is_integer || n->number.integer < 0 || n->number.integer > 1 << 20)
        return fail(e, "decoder Strip: \"%s\" is not a count", name);
    *out = (size_t)n->number.integer;
    return 0;
}

static int read_step(DecodeStep *step, const JsonValue *v, Error *e) {
    const JsonValue *type = json_get(v, "type");
    *step = (DecodeStep){0};
    if (json_is_string(type, "ByteFallback")) return step->kind = DECODE_BYTE_FALLBACK, 0;
    if (json_is_string(type, "Fuse")) return step->kind = DECODE_FUSE, 0;
    if (json_is_string(type, "Replace")) {
        const JsonValue *pattern = json_get(v, "pattern"), *content = json_get(v, "content");
        if (json_get(pattern, "Regex")) return fail(e, "decoder Replace by a regex is not supported (only by a string)");
        const JsonValue *string = string_of(v, json_get(pattern, "String"), "pattern.String", e);
        if (!string) return -1;
        if (!content || content->type != JSON_STRING) return fail(e, "decoder Replace has no \"content\" string");
        *step = (DecodeStep){DECODE_REPLACE, string->string, string->len, content->string, content->len, 0, 0, false};
        return 0;
    }
    if (json_is_string(type, "Strip")) {
        const JsonValue *content = string_of(v, json_get(v, "content"), "content", e);
        if (!content) return -1;
        uint32_t c;
        bool truncated;
        if (utf8_next(content->string, content->len, &c, &truncated) != content->len)
            return fail(e, "decoder Strip: \"content\" is not one character");
        *step = (DecodeStep){.kind = DECODE_STRIP, .content = content->string, .content_len = content->len};
        if (count_of(v, "start", &step->start, e) != 0 || count_of(v, "stop", &step->stop, e) != 0) return -1;
        return 0;
    }
    if (json_is_string(type, "Metaspace")) {
        const JsonValue *replacement = string_of(v, json_get(v, "replacement"), "replacement", e);
        const JsonValue *scheme = json_get(v, "prepend_scheme"), *add_prefix_space = json_get(v, "add_prefix_space");
        if (!replacement) return -1;
        *step = (DecodeStep){.kind = DECODE_METASPACE, .pattern = replacement->string, .pattern_len = replacement->len};
        if (json_is_string(scheme, "always") || json_is_string(scheme, "first")) step->drop_first = true;
        else if (json_is_null(scheme) && add_prefix_space && add_prefix_space->type == JSON_BOOL)
            step->drop_first = add_prefix_space->boolean;
        else if (!json_is_string(scheme, "never"))
            return fail(e, "decoder Metaspace: prepend_scheme is not \"always\", \"first\" or \"never\"");
        return 0;
    }
    return fail(e, "decoder %s is not supported (only ByteLevel alone, or Replace, ByteFallback, Fuse, Strip, "
                   "Metaspace and a Sequence of them)", section_type(v));
}

static int add_steps(Decoder *d, const JsonValue *v, Error *e) {
    if (json_is_string(json_get(v, "type"), "Sequence")) {
        const JsonValue *steps = json_get(v, "decoders");
        if (!steps || steps->type != JSON_ARRAY) return fail(e, "decoder Sequence has no \"decoders\" array");
        for (size_t i = 0; i < steps->len; i++)
            if (add_steps(d, &steps->items[i], e) != 0) return -1;
        return 0;
    }
    if (json_is_string(json_get(v, "type"), "ByteLevel"))
        return fail(e, "decoder ByteLevel is supported only on its own, not in a Sequence");
    d->steps = xrealloc(d->steps, d->n + 1, sizeof *d->steps);
    if (read_step(&d->steps[d->n], v, e) != 0) return -1;
    d->n++;
    return 0;
}

int decoder_read(Decoder *d, const JsonValue *section, Error *e) {
    *d = (Decoder){0};
    if (json_is_null(section)) return fail(e, "there is no decoder (not supported)");
    if (json_is_string(json_get(section, "type"), "ByteLevel")) return d->byte_level = true, 0;
    return add_steps(d, section, e);
}

void decoder_own(Decoder *d) {
    size_t total = 0;
    for (size_t i = 0; i < d->n; i++) total += d->steps[i].pattern_len + d->steps[i].content_len;
    char *at = d->strings = xmalloc(total + 1);
    for (size_t i = 0; i < d->n; i++) {
        DecodeStep *step = &d->steps[i];
        if (step->pattern) memcpy(at, step->pattern, step->pattern_len), step->pattern = at, at += step->pattern_len;
        if (step->content) memcpy(at, step->content, step->content_len), step->content = at, at += step->content_len;
    }
}

void decoder_free(Decoder *d) {
    free(d->steps);
    free(d->strings);
    *d = (Decoder){0};
}

/* ---- running the steps ---- */

/* A list of strings: string i is text[ends[i - 1] .. ends[i]) (ends[-1] = 0). */
typedef struct {
    Bytes text;
    size_t *ends;
    size_t n, cap;
} Strings;

static void strings_end(Strings *l) {
    if (l->n == l->cap) l->ends = xrealloc(l->ends, l->cap = 2 * l->cap + 8, sizeof *l->ends);
    l->ends[l->n++] = l->text.len;
}

static void strings_push(Strings *l, const char *s, size_t n) {
    bytes_add(&l->text, s, n);
    strings_end(l);
}

static const char *string_at(const Strings *l, size_t i, size_t *len) {
    size_t start = i ? l->ends[i - 1] : 0;
    *len = l->ends[i] - start;
    return l->text.text + start;
}

static void strings_free(Strings *l) {
    bytes_free(&l->text);
    free(l->ends);
}

/* s[0..n) with each occurrence of pattern replaced by content, appended. */
static void add_replaced(Bytes *out, const char *s, size_t n, const char *pattern, size_t pattern_len,
                         const char *content, size_t content_len) {
    for (size_t i = 0; i < n;) {
        const char *hit = memmem(s + i, n - i, pattern, pattern_len);
        size_t end = hit ? (size_t)(hit - s) : n;
        bytes_add(out, s + i, end - i);
        if (!hit) break;
        bytes_add(out, content, content_len);
        i = end + pattern_len;
    }
}

/* The byte a <0xNN> token stands for (hex digits in either case), or -1. */
static int fallback_byte(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int byte = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int digit = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
        if (digit < 0) return -1;
        byte = byte * 16 + digit;
    }
    return byte;
}

/* Whether s[0..n) is valid UTF-8. */
static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t c;
        bool truncated;
        i += utf8_next(s + i, n - i, &c, &truncated);
        if (c == UTF8_INVALID) return false;
    }
    return true;
}

/* ByteFallback: a run of byte tokens in bytes[0..n) becomes one string. */
static void push_bytes(Strings *out, const char *bytes, size_t n) {
    static const char replacement[] = "\xEF\xBF\xBD";  /* U+FFFD */
    if (n == 0) return;
    if (valid_utf8(bytes, n)) {
        strings_push(out, bytes, n);
        return;
    }
    for (size_t i = 0; i < n; i++) strings_push(out, replacement, 3);
}

/* The number of bytes of the leading (at_end: trailing) run of at most
 * max copies of the character c[0..c_len) in s[0..n). */
static size_t edge_run(const char *s, size_t n, const char *c, size_t c_len, size_t max, bool at_end) {
    size_t cut = 0;
    for (size_t k = 0; k < max && cut + c_len <= n; k++) {
        const char *at = at_end ? s + n - cut - c_len : s + cut;
        if (memcmp(at, c, c_len) != 0) break;
        cut += c_len;
    }
    return cut;
}

/* One step on in, into out. mid_text: for decoder_piece (see there). */
static void run_step(const DecodeStep *step, const Strings *in, Strings *out, bool mid_text) {
    Bytes run = {0};  /* ByteFallback: the bytes of the run of byte tokens so far */
    for (size_t i = 0; i < in->n; i++) {
        size_t n;
        const char *s = string_at(in, i, &n);
        switch (step->kind) {
        case DECODE_REPLACE:
            add_replaced(&out->text, s, n, step->pattern, step->pattern_len, step->content, step->content_len);
            strings_end(out);
            break;
        case DECODE_BYTE_FALLBACK: {
            int byte = fallback_byte(s, n);
            if (byte >= 0 && mid_text) {
                char b = (char)byte;
                strings_push(out, &b, 1);
            } else if (byte >= 0) {
                char b = (char)byte;
                bytes_add(&run, &b, 1);
            } else {
                push_bytes(out, run.text, run.len);
                run.len = 0;
                strings_push(out, s, n);
            }
            break;
        }
        case DECODE_FUSE:
            bytes_add(&out->text, s, n);
            break;
        case DECODE_STRIP: {
            size_t head = mid_text ? 0 : edge_run(s, n, step->content, step->content_len, step->start, false);
            size_t tail = mid_text ? 0 : edge_run(s + head, n - head, step->content, step->content_len, step->stop, true);
            strings_push(out, s + head, n - head - tail);
            break;
        }
        case DECODE_METASPACE:
            if (i == 0 && step->drop_first && !mid_text)
                add_replaced(&out->text, s, n, step->pattern, step->pattern_len, "", 0);
            else
                add_replaced(&out->text, s, n, step->pattern, step->pattern_len, " ", 1);
            strings_end(out);
            break;
        }
    }
    if (step->kind == DECODE_BYTE_FALLBACK) push_bytes(out, run.text, run.len);
    if (step->kind == DECODE_FUSE && in->n > 0) strings_end(out);
    bytes_free(&run);
}

/* The steps on tokens[0..n), then the strings joined. */
static char *run_steps(const Decoder *d, const char *const *tokens, const size_t *lens, size_t n, bool mid_text,
                       size_t *len) {
    Strings list = {0}, next = {0};
    for (size_t i = 0; i < n; i++) strings_push(&list, tokens[i], lens[i]);
    for (size_t k = 0; k < d->n; k++) {
        next.text.len = next.n = 0;
        run_step(&d->steps[k], &list, &next, mid_text);
        Strings swap = list;
        list = next, next = swap;
    }
    strings_free(&next);
    free(list.ends);
    bytes_add(&list.text, "", 0);
    *len = list.text.len;
    return list.text.text;
}

char *decoder_run(const Decoder *d, const char *const *tokens, const size_t *lens, size_t n, size_t *len) {
    return run_steps(d, tokens, lens, n, false, len);
}

char *decoder_piece(const Decoder *d, const char *token, size_t n, size_t *len) {
    return run_steps(d, &token, &n, 1, true, len);
}
