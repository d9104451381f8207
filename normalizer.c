/* normalizer.c - tokenizer.json's normalizer: reading its steps, and
 * applying them to a text. */
#define _GNU_SOURCE /* memmem() */
#include "normalizer.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"
#include "unicode.h"

/* Reads one step (not a Sequence) into *step. */
static int read_step(NormalizeStep *step, const JsonValue *v, Error *e) {
    if (json_is_string(json_get(v, "type"), "NFC")) {
        *step = (NormalizeStep){.kind = NORMALIZE_NFC};
        return 0;
    }
    if (json_is_string(json_get(v, "type"), "Prepend")) {
        const JsonValue *prepend = json_get(v, "prepend");
        if (!prepend || prepend->type != JSON_STRING) return fail(e, "normalizer Prepend has no \"prepend\" string");
        *step = (NormalizeStep){.kind = NORMALIZE_PREPEND, .content = prepend->string, .content_len = prepend->len};
        return 0;
    }
    if (json_is_string(json_get(v, "type"), "Replace")) {
        const JsonValue *pattern = json_get(v, "pattern"), *content = json_get(v, "content");
        const JsonValue *string = json_get(pattern, "String");
        if (json_get(pattern, "Regex"))
            return fail(e, "normalizer Replace by a regex is not supported (only by a string)");
        if (!string || string->type != JSON_STRING || string->len == 0)
            return fail(e, "normalizer Replace has no \"pattern\" {\"String\": ...} that is a non-empty string");
        if (!content || content->type != JSON_STRING) return fail(e, "normalizer Replace has no \"content\" string");
        *step = (NormalizeStep){NORMALIZE_REPLACE, string->string, string->len, content->string, content->len};
        return 0;
    }
    return fail(e, "normalizer %s is not supported (only NFC, Replace, Prepend and a Sequence of them)",
                section_type(v));
}

/* Appends the steps of section v, a Sequence's flattened (a Sequence in a
 * Sequence does the same as its steps in its place). JSON nesting is
 * bounded, so the recursion is too. */
static int add_steps(Normalizer *nz, const JsonValue *v, Error *e) {
    if (json_is_string(json_get(v, "type"), "Sequence")) {
        const JsonValue *steps = json_get(v, "normalizers");
        if (!steps || steps->type != JSON_ARRAY) return fail(e, "normalizer Sequence has no \"normalizers\" array");
        for (size_t i = 0; i < steps->len; i++)
            if (add_steps(nz, &steps->items[i], e) != 0) return -1;
        return 0;
    }
    nz->steps = xrealloc(nz->steps, nz->n + 1, sizeof *nz->steps);
    if (read_step(&nz->steps[nz->n], v, e) != 0) return -1;
    nz->n++;
    return 0;
}

int normalizer_read(Normalizer *nz, const JsonValue *section, Error *e) {
    *nz = (Normalizer){0};
    return json_is_null(section) ? 0 : add_steps(nz, section, e);
}

void normalizer_own(Normalizer *nz) {
    size_t total = 0;
    for (size_t i = 0; i < nz->n; i++) total += nz->steps[i].pattern_len + nz->steps[i].content_len;
    char *at = nz->strings = xmalloc(total + 1);
    for (size_t i = 0; i < nz->n; i++) {
        NormalizeStep *step = &nz->steps[i];
        if (step->pattern_len) memcpy(at, step->pattern, step->pattern_len);
        step->pattern = at, at += step->pattern_len;
        if (step->content_len) memcpy(at, step->content, step->content_len);
        step->content = at, at += step->content_len;
    }
}

void normalizer_free(Normalizer *nz) {
    free(nz->steps);
    free(nz->strings);
    *nz = (Normalizer){0};
}

/* s[0..n) with every occurrence of the step's pattern replaced, left to
 * right, into out (emptied first). */
static void replace_all(const NormalizeStep *step, const char *s, size_t n, Bytes *out) {
    out->len = 0;
    bytes_add(out, "", 0);
    for (size_t i = 0; i < n;) {
        const char *hit = step->pattern_len <= n - i ? memmem(s + i, n - i, step->pattern, step->pattern_len) : NULL;
        size_t end = hit ? (size_t)(hit - s) : n;
        bytes_add(out, s + i, end - i);
        if (!hit) break;
        bytes_add(out, step->content, step->content_len);
        i = end + step->pattern_len;
    }
}

char *normalizer_apply(const Normalizer *nz, const char *s, size_t n, size_t *out_len) {
    Bytes text = {0}, next = {0};  /* the text so far (when changed), and the next step's */
    for (size_t k = 0; k < nz->n; k++) {
        const NormalizeStep *step = &nz->steps[k];
        const char *in = text.text ? text.text : s;
        size_t in_len = text.text ? text.len : n;
        if (step->kind == NORMALIZE_NFC) {
            if (nfc_quick_check(in, in_len)) continue;
            size_t len;
            char *nfc = nfc_normalize(in, in_len, &len);
            bytes_free(&text);
            text = (Bytes){nfc, len, len + 1};
            continue;
        }
        if (step->kind == NORMALIZE_PREPEND) {
            if (in_len == 0) continue;
            next.len = 0;
            bytes_add(&next, step->content, step->content_len);
            bytes_add(&next, in, in_len);
        } else {
            if (!memmem(in, in_len, step->pattern, step->pattern_len)) continue;
            replace_all(step, in, in_len, &next);
        }
        Bytes swap = text;
        text = next, next = swap;
    }
    bytes_free(&next);
    *out_len = text.len;
    return text.text;
}
