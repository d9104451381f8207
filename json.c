/* json.c - a hand-written RFC 8259 parser: recursive descent over the bytes,
 * with every node and string allocated from one arena. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

/* ---- the arena: a chain of big blocks, freed all at once ---- */

typedef struct JsonBlock {
    struct JsonBlock *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} JsonBlock;

/* size bytes aligned to align (a power of two up to 16): strings need no
 * alignment, and packing them saves much memory in big documents. */
static void *arena_alloc(JsonBlock **arena, size_t size, size_t align) {
    JsonBlock *b = *arena;
    size_t at = b ? (b->used + align - 1) & ~(align - 1) : 0;
    if (!b || at > b->cap || b->cap - at < size) {
        size_t cap = size > (1u << 20) ? size : (1u << 20);
        b = xmalloc(sizeof(JsonBlock) + cap);
        b->next = *arena;
        b->cap = cap;
        *arena = b;
        at = 0;
    }
    b->used = at + size;
    return b->data + at;
}

static void arena_free(JsonBlock *b) {
    while (b) {
        JsonBlock *next = b->next;
        free(b);
        b = next;
    }
}

/* ---- the parser ---- */

/* The name of the member open at one depth, or NULL for an array's item. */
typedef struct {
    const char *name;
    size_t len;
} PathName;

typedef struct {
    const char *start, *p, *end;
    JsonBlock *arena;
    /* The paths of the members to leave out ("model.vocab"), and how many
     * names the longest has: deeper members are never compared. path[d]
     * names what is open in the container at depth d. */
    const char *const *skip;
    int skip_depth;
    JsonSpan *spans;           /* [number of skip paths]: where each one's value lay, or NULL */
    PathName path[JSON_MAX_DEPTH];
    /* Inside a skipped value: everything is checked, nothing is kept. The
     * strings with escapes are decoded into scratch, reused. */
    bool discard;
    char *scratch;
    size_t scratch_cap;
    /* Children (JsonValues of arrays, JsonMembers of objects) of the
     * containers being parsed, stacked in one growing buffer that nested
     * containers share; copied to the arena when their container is done.
     * Sharing one buffer keeps the peak memory of big documents down. */
    unsigned char *stack;
    size_t stack_used, stack_cap;  /* bytes */
    /* The children of a big container (OWN_BLOCK_MIN bytes or more) move off
     * the stack to a block of their own, grown in place and in the end made
     * part of the arena: then big arrays and objects are neither held twice
     * nor copied. own[d] is the block of the container open at depth d. */
    JsonBlock *own[JSON_MAX_DEPTH];
    Error *e;
} Parser;

/* Reports an error at byte `at`, as a 1-based line and column. */
static int error_at(Parser *ps, const char *at, const char *what) {
    size_t line = 1, col = 1;
    for (const char *q = ps->start; q < at; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    return fail(ps->e, "line %zu, column %zu: %s", line, col, what);
}

static void skip_space(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int parse_value(Parser *ps, JsonValue *out, int depth);

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(s[i]);
        if (d < 0) return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *dst, unsigned cp) {
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence at s (s < end), or 0 if it is not one:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_valid_len(const unsigned char *s, const unsigned char *end) {
    unsigned c = s[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - s) < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* Room for size bytes to decode a string into and forget (in discard mode). */
static char *scratch(Parser *ps, size_t size) {
    if (ps->scratch_cap < size) {
        ps->scratch_cap = size > 2 * ps->scratch_cap ? size : 2 * ps->scratch_cap;
        ps->scratch = xrealloc(ps->scratch, ps->scratch_cap, 1);
    }
    return ps->scratch;
}

/* Parses the string starting at the opening quote into arena memory (in
 * discard mode, into nothing: *out is NULL). The decoded form is never longer
 * than the escaped one, which bounds the size. */
static int parse_string(Parser *ps, const char **out, size_t *out_len) {
    const char *q = ++ps->p;  /* past the opening quote */

    /* Most strings have no escapes: find the closing quote, and copy the
     * bytes at once, checking the UTF-8 only when there are non-ASCII ones. */
    unsigned char seen = 0;  /* all the bytes OR-ed, to know if one is >= 0x80 */
    while (q < ps->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) seen |= (unsigned char)*q++;
    if (q < ps->end && *q == '"') {
        for (const unsigned char *s = (const unsigned char *)ps->p; (seen & 0x80) && s < (const unsigned char *)q;) {
            size_t len = *s < 0x80 ? 1 : utf8_valid_len(s, (const unsigned char *)q);
            if (len == 0) return error_at(ps, (const char *)s, "invalid UTF-8 in string");
            s += len;
        }
        size_t n = (size_t)(q - ps->p);
        char *dst = NULL;
        if (!ps->discard) {
            dst = arena_alloc(&ps->arena, n + 1, 1);
            memcpy(dst, ps->p, n);
            dst[n] = '\0';
        }
        ps->p = q + 1;
        *out = dst;
        *out_len = n;
        return 0;
    }

    /* The general case: find the end, then decode escapes on the way. */
    q = ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return error_at(ps, ps->p - 1, "unterminated string");
    size_t size = (size_t)(q - ps->p) + 1;
    char *dst = ps->discard ? scratch(ps, size) : arena_alloc(&ps->arena, size, 1);
    size_t n = 0;
    const char *s = ps->p;
    while (s < q) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x80 && c != '\\') {
            dst[n++] = (char)c;
            s++;
        } else if (c < 0x20) {
            return error_at(ps, s, "control character in string (must be escaped)");
        } else if (c >= 0x80) {
            size_t len = utf8_valid_len((const unsigned char *)s, (const unsigned char *)q);
            if (len == 0) return error_at(ps, s, "invalid UTF-8 in string");
            memcpy(dst + n, s, len);
            n += len;
            s += len;
        } else {  /* a backslash escape */
            const char *esc = s++;
            char k = *s++;
            switch (k) {
            case '"': dst[n++] = '"'; break;
            case '\\': dst[n++] = '\\'; break;
            case '/': dst[n++] = '/'; break;
            case 'b': dst[n++] = '\b'; break;
            case 'f': dst[n++] = '\f'; break;
            case 'n': dst[n++] = '\n'; break;
            case 'r': dst[n++] = '\r'; break;
            case 't': dst[n++] = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (q - s < 4 || hex4(s, &cp) != 0) return error_at(ps, esc, "bad \\u escape (need 4 hex digits)");
                s += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return error_at(ps, esc, "lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (q - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) != 0 || lo < 0xDC00 ||
                        lo > 0xDFFF)
                        return error_at(ps, esc, "high surrogate not followed by a low surrogate escape");
                    s += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                n += put_utf8(dst + n, cp);
                break;
            }
            default: return error_at(ps, esc, "unknown escape in string");
            }
        }
    }
    dst[n] = '\0';
    ps->p = q + 1;
    *out = ps->discard ? NULL : dst;
    *out_len = n;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(Parser *ps, JsonValue *out) {
    const char *s = ps->p, *q = s;
    bool negative = false, fits = true;
    uint64_t mag = 0;
    if (q < ps->end && *q == '-') negative = true, q++;
    if (q >= ps->end || !is_digit(*q)) return error_at(ps, s, "bad number");
    if (*q == '0') {
        q++;
    } else {
        while (q < ps->end && is_digit(*q)) {
            unsigned d = (unsigned)(*q++ - '0');
            if (mag > (UINT64_MAX - d) / 10) fits = false;
            else mag = mag * 10 + d;
        }
    }
    bool integral = true;
    if (q < ps->end && *q == '.') {
        integral = false;
        q++;
        if (q >= ps->end || !is_digit(*q)) return error_at(ps, s, "bad number (digit expected after '.')");
        while (q < ps->end && is_digit(*q)) q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integral = false;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || !is_digit(*q)) return error_at(ps, s, "bad number (digit expected in exponent)");
        while (q < ps->end && is_digit(*q)) q++;
    }
    out->type = JSON_NUMBER;
    if (ps->discard) {  /* well formed, and its value not wanted */
        ps->p = q;
        return 0;
    }
    out->number.is_integer = false;
    out->number.integer = 0;
    if (integral && fits && mag <= (uint64_t)INT64_MAX + negative) {
        out->number.is_integer = true;
        out->number.integer = negative ? (int64_t)(0 - mag) : (int64_t)mag;
    }
    if (out->number.is_integer && mag <= (1ull << 53)) {
        out->number.value = (double)out->number.integer;
    } else {  /* strtod needs a NUL-terminated copy */
        size_t len = (size_t)(q - s);
        char small[64];
        char *buf = len < sizeof small ? small : xmalloc(len + 1);
        memcpy(buf, s, len);
        buf[len] = '\0';
        out->number.value = strtod(buf, NULL);
        if (buf != small) free(buf);
    }
    ps->p = q;
    return 0;
}

static int expect_word(Parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return error_at(ps, ps->p, "unexpected character");
    ps->p += n;
    return 0;
}

static void push_child(Parser *ps, const void *child, size_t size) {
    if (ps->stack_cap - ps->stack_used < size) {
        ps->stack_cap = ps->stack_cap ? 2 * ps->stack_cap : 1u << 14;
        ps->stack = xrealloc(ps->stack, ps->stack_cap, 1);
    }
    memcpy(ps->stack + ps->stack_used, child, size);
    ps->stack_used += size;
}

enum { OWN_BLOCK_MIN = 1 << 16 };

/* Adds a child to the container open at depth, whose children start at
 * base on the stack (or are in its own block). */
static void add_child(Parser *ps, size_t base, int depth, const void *child, size_t size) {
    JsonBlock *b = ps->own[depth];
    if (!b && ps->stack_used - base < OWN_BLOCK_MIN) {
        push_child(ps, child, size);
        return;
    }
    if (!b) {
        size_t n = ps->stack_used - base;
        b = xmalloc(sizeof(JsonBlock) + 2 * n);
        b->next = NULL;
        b->used = n;
        b->cap = 2 * n;
        memcpy(b->data, ps->stack + base, n);
        ps->stack_used = base;
    } else if (b->cap - b->used < size) {
        b->cap *= 2;
        b = xrealloc(b, sizeof(JsonBlock) + b->cap, 1);
    }
    memcpy(b->data + b->used, child, size);
    b->used += size;
    ps->own[depth] = b;
}

/* The children of the container open at depth, as one array in the arena;
 * *size is their size in bytes. */
static void *take_children(Parser *ps, size_t base, int depth, size_t align, size_t *size) {
    JsonBlock *b = ps->own[depth];
    if (b) {  /* join the arena behind its current block, which stays the one to allocate from */
        ps->own[depth] = NULL;
        if (ps->arena) {
            b->next = ps->arena->next;
            ps->arena->next = b;
        } else {
            ps->arena = b;
        }
        *size = b->used;
        return b->data;
    }
    *size = ps->stack_used - base;
    void *children = arena_alloc(&ps->arena, *size, align);
    if (*size) memcpy(children, ps->stack + base, *size);  /* the stack may not exist yet */
    ps->stack_used = base;
    return children;
}

/* Whether the skip path names path[0..depth] exactly. */
static bool path_is(const Parser *ps, int depth, const char *path) {
    for (int d = 0;; d++) {
        size_t n = strcspn(path, ".");
        if (n != ps->path[d].len || memcmp(path, ps->path[d].name, n) != 0) return false;
        if (d == depth) return path[n] == '\0';
        if (path[n] != '.') return false;
        path += n + 1;
    }
}

/* Notes key as the name open in the object at depth, and tells which skip
 * path the member's is (its index), or -1 when none. */
static int member_skipped(Parser *ps, int depth, const char *key, size_t len) {
    if (depth >= ps->skip_depth) return -1;
    ps->path[depth] = (PathName){key, len};
    for (int d = 0; d < depth; d++)
        if (!ps->path[d].name) return -1;  /* inside an array: no path reaches it */
    for (int i = 0; ps->skip[i]; i++)
        if (path_is(ps, depth, ps->skip[i])) return i;
    return -1;
}

/* One child of the container open at depth: an array's value, or an
 * object's "key": value member. Nothing is added in discard mode. */
static int parse_child(Parser *ps, size_t base, int depth, bool object) {
    if (!object) {
        JsonValue v;
        if (parse_value(ps, &v, depth + 1) != 0) return -1;
        if (!ps->discard) add_child(ps, base, depth, &v, sizeof v);
        return 0;
    }
    JsonMember m;
    skip_space(ps);
    if (ps->p >= ps->end || *ps->p != '"')
        return error_at(ps, ps->p, ps->p < ps->end ? "expected a string key" : "unexpected end of input in object");
    if (parse_string(ps, &m.key, &m.key_len) != 0) return -1;
    skip_space(ps);
    if (ps->p >= ps->end || *ps->p != ':') return error_at(ps, ps->p, "expected ':' after key");
    ps->p++;
    /* A skipped member's value is parsed in discard mode, not added, and
     * where it lay noted. */
    int skipped = ps->discard ? -1 : member_skipped(ps, depth, m.key, m.key_len);
    bool keep = !ps->discard && skipped < 0, outer = ps->discard;
    ps->discard = !keep;
    skip_space(ps);
    size_t start = (size_t)(ps->p - ps->start);
    int rc = parse_value(ps, &m.value, depth + 1);
    ps->discard = outer;
    if (rc != 0) return -1;
    if (keep) add_child(ps, base, depth, &m, sizeof m);
    if (skipped >= 0 && ps->spans) ps->spans[skipped] = (JsonSpan){start, (size_t)(ps->p - ps->start)};
    return 0;
}

/* An array [a, b, ...] or an object {"k": v, ...}: children separated by
 * commas up to the closing bracket, then kept as one array. */
static int parse_container(Parser *ps, JsonValue *out, int depth) {
    bool object = *ps->p == '{';
    char close = object ? '}' : ']';
    size_t base = ps->stack_used;
    if (!object && depth < ps->skip_depth) ps->path[depth] = (PathName){NULL, 0};
    ps->p++;  /* '[' or '{' */
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
    } else {
        for (;;) {
            if (parse_child(ps, base, depth, object) != 0) return -1;
            skip_space(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                break;
            }
            if (ps->p < ps->end) return error_at(ps, ps->p, object ? "expected ',' or '}'" : "expected ',' or ']'");
            return error_at(ps, ps->p, object ? "unexpected end of input in object" : "unexpected end of input in array");
        }
    }
    if (ps->discard) return 0;  /* it has no children to keep */
    size_t size;
    if (object) {
        out->type = JSON_OBJECT;
        out->members = take_children(ps, base, depth, _Alignof(JsonMember), &size);
        out->len = size / sizeof(JsonMember);
    } else {
        out->type = JSON_ARRAY;
        out->items = take_children(ps, base, depth, _Alignof(JsonValue), &size);
        out->len = size / sizeof(JsonValue);
    }
    return 0;
}

static int parse_value(Parser *ps, JsonValue *out, int depth) {
    if (depth >= JSON_MAX_DEPTH) return error_at(ps, ps->p, "nesting too deep");
    skip_space(ps);
    if (ps->p >= ps->end) return error_at(ps, ps->p, "unexpected end of input");
    memset(out, 0, sizeof *out);
    switch (*ps->p) {
    case '{':
    case '[': return parse_container(ps, out, depth);
    case '"':
        out->type = JSON_STRING;
        return parse_string(ps, &out->string, &out->len);
    case 't':
        out->type = JSON_BOOL;
        out->boolean = true;
        return expect_word(ps, "true");
    case 'f':
        out->type = JSON_BOOL;
        return expect_word(ps, "false");
    case 'n':
        out->type = JSON_NULL;
        return expect_word(ps, "null");
    default:
        if (*ps->p == '-' || is_digit(*ps->p)) return parse_number(ps, out);
        return error_at(ps, ps->p, "unexpected character");
    }
}

/* How many names the path "a.b.c" has, counting up to JSON_MAX_DEPTH (no
 * member lies deeper). */
static int path_names(const char *path) {
    int n = 1;
    for (; *path && n < JSON_MAX_DEPTH; path++) n += *path == '.';
    return n;
}

int json_parse_except(JsonDoc *doc, const char *text, size_t len, const char *const *skip, JsonSpan *spans,
                      Error *e) {
    Parser ps = {.start = text, .p = text, .end = text + len, .skip = skip, .spans = spans, .e = e};
    for (int i = 0; skip && skip[i]; i++) {
        int n = path_names(skip[i]);
        if (n > ps.skip_depth) ps.skip_depth = n;
        if (spans) spans[i] = (JsonSpan){0, 0};
    }
    int rc = parse_value(&ps, &doc->root, 0);
    if (rc == 0) {
        skip_space(&ps);
        if (ps.p != ps.end) rc = error_at(&ps, ps.p, "unexpected data after the JSON value");
    }
    free(ps.stack);
    free(ps.scratch);
    for (int d = 0; d < JSON_MAX_DEPTH; d++) free(ps.own[d]);  /* left by an error */
    if (rc != 0) {
        arena_free(ps.arena);
        memset(doc, 0, sizeof *doc);
        return -1;
    }
    doc->arena = ps.arena;
    return 0;
}

int json_parse(JsonDoc *doc, const char *text, size_t len, Error *e) {
    return json_parse_except(doc, text, len, NULL, NULL, e);
}

void json_free(JsonDoc *doc) {
    arena_free(doc->arena);
    memset(doc, 0, sizeof *doc);
}

int json_map_file(const char *path, const void **text, size_t *len, Error *e) {
    if (map_file(path, text, len, e) != 0) return -1;
    if (*len > JSON_MAX_FILE_BYTES) {
        unmap_file(*text, *len);
        return fail(e, "%s: %zu bytes, too large for a JSON file run reads (at most %zu MiB)", path, *len,
                    JSON_MAX_FILE_BYTES >> 20);
    }
    return 0;
}

int json_parse_file(JsonDoc *doc, const char *path, Error *e) {
    const void *text;
    size_t len;
    if (json_map_file(path, &text, &len, e) != 0) return -1;
    Error why;
    int rc = json_parse(doc, text ? text : "", len, &why);
    unmap_file(text, len);
    return rc != 0 ? fail(e, "%s: %s", path, why.msg) : 0;
}

const JsonValue *json_get(const JsonValue *v, const char *key) {
    if (!v || v->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = v->len; i-- > 0;)
        if (v->members[i].key_len == n && memcmp(v->members[i].key, key, n) == 0) return &v->members[i].value;
    return NULL;
}

const char *json_type_name(JsonType t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}
