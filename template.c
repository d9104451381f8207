/* template.c - a Jinja interpreter for chat templates (see template.h).
 *
 * A template is lexed as jinja2's lexer does it (the same regular rules,
 * written out by hand), parsed by a recursive-descent parser shaped like
 * jinja2's into a tree of Nodes, and rendered by walking that tree. Values
 * follow Python's data model closely enough that printing, comparing,
 * indexing and calling methods give what Python gives: None, bool, int
 * (64-bit), float, str, list, tuple, dict, plus Jinja's Undefined, loop and
 * namespace objects and macros.
 *
 * Memory: everything a parse or a render allocates comes from one arena
 * (a list of chunks) that is freed as a whole at the end. Errors unwind
 * with longjmp to template_parse or template_render, which free that arena:
 * nothing in between holds memory of its own, so an error can never leak.
 *
 * Sections: errors and arena; strings and UTF-8; values; printing (str,
 * repr, JSON); the lexer; the parser; the interpreter (names and scopes,
 * operators, attributes and items, methods, filters, tests, calls,
 * statements); the public functions. */
/* memmem(): a linear-time substring search */
#define _GNU_SOURCE
#include "template.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "unicode.h"

/* ======================================================================
 * Errors and the arena
 * ====================================================================== */

enum {
    CHUNK_BYTES = 64 << 10,          /* arena chunk size (bigger requests get their own) */
    MAX_ERROR_TEXT = 400,            /* bytes of an error message before "template line N: " */
    JINJA_MAX_RANGE = 100000,        /* jinja2's sandbox refuses longer range() objects */
    SCAN_BYTES_PER_ITERATION = 1024, /* see count_scan */
};

typedef struct Chunk {
    struct Chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} Chunk;

/* What the parser and the renderer share: where errors unwind to, the
 * template line being worked on (for messages) and the arena. */
typedef struct {
    jmp_buf *unwind;
    Error *e;
    int line;
    Chunk *chunks;
    size_t allocated, limit;
    size_t iterations;   /* a render's loop iterations and items filtered, printed or sorted so far */
    unsigned char *last; /* the last allocation from the current chunk (see grow_last) */
    size_t last_len;     /* its size as asked for */
} Ctx;

/* Fills the error as "template line N: <message>" (one line of valid UTF-8)
 * and unwinds to the public function that is running. */
static noreturn void raise_at(Ctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static noreturn void raise_at(Ctx *c, int line, const char *fmt, ...) {
    char msg[MAX_ERROR_TEXT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    /* One line, valid UTF-8: a byte of a template's character can reach a
     * message on its own (an unknown format code, say), and a long message
     * is cut anywhere. */
    for (size_t i = 0; i < n;) {
        uint32_t ch;
        bool truncated;
        size_t used = utf8_next(msg + i, n - i, &ch, &truncated);
        if (ch == UTF8_INVALID) memset(msg + i, '?', used);
        else if (ch < 0x20 || ch == 0x7F) msg[i] = ' ';
        i += used;
    }
    fail(c->e, "template line %d: %s", line, msg);
    longjmp(*c->unwind, 1);
}

#define raise_error(c, ...) raise_at((c), (c)->line, __VA_ARGS__)

static void arena_free(Chunk *k) {
    while (k) {
        Chunk *next = k->next;
        free(k);
        k = next;
    }
}

static void *alloc(Ctx *c, size_t size) {
    size_t asked = size;
    if (size > c->limit) raise_error(c, "the template needs more than %zu MiB of memory", c->limit >> 20);
    size = (size + 15) & ~(size_t)15;
    Chunk *k = c->chunks;
    if (!k || k->size - k->used < size) {
        size_t want = size > CHUNK_BYTES ? size : CHUNK_BYTES;
        if (want > c->limit - c->allocated)
            raise_error(c, "the template needs more than %zu MiB of memory", c->limit >> 20);
        k = xmalloc(sizeof *k + want);
        k->size = want;
        k->used = 0;
        c->allocated += want;
        if (want > CHUNK_BYTES && c->chunks) {
            /* A big block of its own goes behind the current chunk, which keeps filling. */
            k->next = c->chunks->next;
            c->chunks->next = k;
        } else {
            k->next = c->chunks;
            c->chunks = k;
        }
    }
    unsigned char *p = k->data + k->used;
    k->used += size;
    c->last = k == c->chunks ? p : NULL;
    c->last_len = asked;
    return p;
}

/* Grows the last allocation, p, of len bytes to new_len bytes where it is,
 * if it is the last and its chunk has room; returns whether it did. */
static bool grow_last(Ctx *c, const void *p, size_t len, size_t new_len) {
    Chunk *k = c->chunks;
    if (!k || p != c->last || len != c->last_len || new_len > c->limit) return false;
    size_t old_size = (len + 15) & ~(size_t)15, new_size = (new_len + 15) & ~(size_t)15;
    if (new_size - old_size > k->size - k->used) return false;
    k->used += new_size - old_size;
    c->last_len = new_len;
    return true;
}

/* One more iteration of the budget of TEMPLATE_MAX_ITERATIONS. */
static void count_iteration(Ctx *c) {
    if (++c->iterations > TEMPLATE_MAX_ITERATIONS)
        raise_error(c, "the template ran more than %d loop iterations", TEMPLATE_MAX_ITERATIONS);
}

/* An array of n elements of size bytes, with the product checked. */
static void *alloc_array(Ctx *c, size_t n, size_t size) {
    size_t total;
    if (mul_size(n, size, &total) != 0) raise_error(c, "the template needs too much memory");
    return alloc(c, total);
}

/* ======================================================================
 * Strings and UTF-8
 * ====================================================================== */

typedef struct {
    const char *p;
    size_t n;
} Str;

static Str str_c(const char *s) { return (Str){s, strlen(s)}; }
static bool str_eq(Str a, Str b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }
static bool str_is(Str a, const char *s) { return str_eq(a, str_c(s)); }

static bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

/* The character at s[0..n) (n >= 1) and its length in bytes; text is valid
 * UTF-8 everywhere in a render, but a stray byte reads as U+FFFD. */
static uint32_t next_char(const char *s, size_t n, size_t *used) {
    if ((unsigned char)s[0] < 0x80) {
        *used = 1;
        return (unsigned char)s[0];
    }
    uint32_t c;
    bool truncated;
    *used = utf8_next(s, n, &c, &truncated);
    return c == UTF8_INVALID ? UNICODE_REPLACEMENT : c;
}

/* The start of the character that ends at s[n]. */
static size_t prev_char_start(const char *s, size_t n) {
    size_t k = n - 1;
    while (k > 0 && is_continuation((unsigned char)s[k])) k--;
    return k;
}

static size_t count_chars(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += !is_continuation((unsigned char)s[i]);
    return count;
}

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

/* Python's str.isspace(): the characters Python's split() and strip() and
 * the \s of jinja2's lexer treat as white space. */
static bool py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Python's str.isprintable() for one character, which decides what repr()
 * escapes. Exact for ASCII and Latin-1; above that the control, format,
 * separator, surrogate and private-use characters are known, and every
 * other character counts as printable (unassigned ones are the difference). */
static bool py_isprintable(uint32_t c) {
    static const uint32_t format_ranges[][2] = {
        {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},
        {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x180E, 0x180E},   {0x200B, 0x200F},   {0x202A, 0x202E},
        {0x2060, 0x2064},   {0x2066, 0x206F},   {0xD800, 0xF8FF},   {0xFDD0, 0xFDEF},   {0xFEFF, 0xFEFF},
        {0xFFF9, 0xFFFB},   {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F},
        {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
    };
    if (c < 0x20 || (c >= 0x7F && c < 0xA0)) return false;
    if (c == ' ') return true;
    if (c < 0x80) return true;
    if (py_isspace(c)) return false;
    for (size_t i = 0; i < sizeof format_ranges / sizeof format_ranges[0]; i++)
        if (c >= format_ranges[i][0] && c <= format_ranges[i][1]) return false;
    return true;
}

/* Case mapping. Python maps every cased script; this covers ASCII,
 * Latin-1, Latin Extended-A, Greek and Cyrillic (and the German sharp s,
 * which upper-cases to "SS"); other characters are left as they are. */
static uint32_t char_upper(uint32_t c) {
    if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x131) return 'I';
        if (c == 0x17F) return 'S';
        if (c == 0x138 || c == 0x149 || c == 0x178) return c;
        bool odd_lower = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
        if (odd_lower) return (c & 1) ? c - 1 : c;
        return (c & 1) ? c : c - 1; /* 0x139..0x148 and 0x179..0x17E: lower case is even */
    }
    if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x3AC && c <= 0x3CE) {
        static const uint16_t tonos[] = {0x386, 0x388, 0x389, 0x38A};
        if (c <= 0x3AF) return tonos[c - 0x3AC];
        if (c == 0x3CC) return 0x38C;
        if (c == 0x3CD) return 0x38E;
        if (c == 0x3CE) return 0x38F;
    }
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static uint32_t char_lower(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F) {
        if (c == 0x130) return 'i'; /* Python gives "i̇"; the dot is the difference */
        if (c == 0x138 || c == 0x149 || c == 0x131 || c == 0x17F) return c;
        bool even_upper = (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177);
        if (even_upper) return (c & 1) ? c : c + 1;
        return (c & 1) ? c + 1 : c;
    }
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

/* Whether c has case (Python's "cased"): letters whose mapping we know,
 * and any other letter (so that str.title() treats it as part of a word). */
static bool char_is_cased(uint32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    return char_upper(c) != c || char_lower(c) != c || (unicode_class(c) & UNICODE_LETTER);
}

static bool char_is_upper(uint32_t c) { return char_lower(c) != c; }
static bool char_is_lower(uint32_t c) { return char_upper(c) != c || c == 0xDF; }

/* ======================================================================
 * Values
 * ====================================================================== */

typedef enum {
    V_UNDEFINED, /* Jinja's Undefined */
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_LIST, /* list, tuple, range or a dict view (List.type) */
    V_DICT,
    V_ITER,      /* a generator: iterates once */
    V_NAMESPACE, /* namespace(): a dict whose items are attributes */
    V_LOOP,      /* the `loop` of a for loop */
    V_MACRO,
    V_FUNC,    /* a global function: range, dict, namespace, ... */
    V_METHOD,  /* a method bound to its object, e.g. 'a b'.split */
    V_MISSING, /* internal: an argument that was not given */
} Kind;

typedef enum { SEQ_LIST, SEQ_TUPLE, SEQ_RANGE, SEQ_ITEMS, SEQ_KEYS, SEQ_VALUES } SeqType;

typedef struct List List;
typedef struct Dict Dict;
typedef struct Iter Iter;
typedef struct Loop Loop;
typedef struct Macro Macro;
typedef struct Method Method;
typedef struct Undef Undef;

typedef struct {
    uint8_t kind;
    bool ascii;  /* V_STR: every byte is below 0x80, so bytes are characters */
    bool markup; /* V_STR: marked safe (markupsafe's Markup) */
    union {
        bool b;
        int64_t i;
        double f;
        Str s;
        List *list;
        Dict *dict;
        Iter *iter;
        Loop *loop;
        Macro *macro;
        Method *method;
        Undef *undef;
        int func;
    };
} Value;

struct List {
    size_t len, cap;
    SeqType type;
    int64_t range[3]; /* SEQ_RANGE: start, stop, step (for printing) */
    Value *items;
};

/* A dict keeps insertion order (keys[i], vals[i]); past a few items it
 * also keeps a hash index of slot + 1 per bucket (0 = empty). */
struct Dict {
    size_t len, cap;
    Value *keys, *vals;
    uint32_t *index;
    size_t index_cap;
};

/* A generator, made by a filter such as map or select. Like jinja2's,
 * it runs when first iterated (so its errors come then, and only then),
 * and iterates once. */
struct Iter {
    List *list; /* the items, once made */
    size_t pos; /* the next item */
    const char *type_name;
    int filter;       /* the filter that makes the items (while list is NULL) */
    Value source;     /* what it filters */
    const void *args; /* its arguments (an Args) */
};

/* Why a value is undefined: Jinja builds its error messages from this. */
struct Undef {
    const char *hint; /* a message of its own, or NULL */
    Value obj;        /* the object that lacked the attribute or item (V_MISSING for a name) */
    Value name;       /* the name, attribute or item */
    bool unsafe;      /* the sandbox's SecurityError rather than an UndefinedError */
};

static Value v_none(void) { return (Value){.kind = V_NONE}; }
static Value v_bool(bool b) { return (Value){.kind = V_BOOL, .b = b}; }
static Value v_int(int64_t i) { return (Value){.kind = V_INT, .i = i}; }
static Value v_float(double f) { return (Value){.kind = V_FLOAT, .f = f}; }
static Value v_missing(void) { return (Value){.kind = V_MISSING}; }
static bool given(Value v) { return v.kind != V_MISSING; }

/* A str of bytes that stay alive for the render (they are not copied). */
static Value v_str(const char *p, size_t n) { return (Value){.kind = V_STR, .ascii = all_ascii(p, n), .s = {p, n}}; }
static Value v_cstr(const char *s) { return v_str(s, strlen(s)); }

static bool is_str(Value v) { return v.kind == V_STR; }
static bool is_number(Value v) { return v.kind == V_BOOL || v.kind == V_INT || v.kind == V_FLOAT; }
static bool is_integer(Value v) { return v.kind == V_BOOL || v.kind == V_INT; }
static int64_t int_of(Value v) { return v.kind == V_BOOL ? v.b : v.i; }
static double float_of(Value v) { return v.kind == V_FLOAT ? v.f : (double)int_of(v); }
static bool is_seq(Value v, SeqType t) { return v.kind == V_LIST && v.list->type == t; }

static Value new_str(Ctx *c, const char *p, size_t n) {
    if (n > TEMPLATE_MAX_OUTPUT) raise_error(c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    char *q = alloc(c, n + 1);
    if (n) memcpy(q, p, n);
    q[n] = '\0';
    return v_str(q, n);
}

static List *new_list(Ctx *c, SeqType type, size_t len) {
    List *l = alloc(c, sizeof *l);
    *l = (List){.len = len, .cap = len, .type = type, .items = len ? alloc_array(c, len, sizeof(Value)) : NULL};
    return l;
}

static Value v_list(List *l) { return (Value){.kind = V_LIST, .list = l}; }

static Value new_tuple2(Ctx *c, Value a, Value b) {
    List *l = new_list(c, SEQ_TUPLE, 2);
    l->items[0] = a;
    l->items[1] = b;
    return v_list(l);
}

static void list_push(Ctx *c, List *l, Value v) {
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Value *items = alloc_array(c, cap, sizeof(Value));
        if (l->len) memcpy(items, l->items, l->len * sizeof(Value));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = v;
}

static Value undefined_named(Ctx *c, Str name) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.obj = v_missing(), .name = v_str(name.p, name.n)};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

static Value undefined_hint(Ctx *c, const char *hint) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.hint = hint, .obj = v_missing(), .name = v_none()};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

/* What obj[name] or obj.name gives when obj has no such item. */
static Value undefined_member(Ctx *c, Value obj, Value name) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.obj = obj, .name = name};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

/* ---- dicts ---- */

enum { DICT_LINEAR_MAX = 8 }; /* dicts up to this size are searched without an index */

static Dict *new_dict(Ctx *c, size_t cap) {
    Dict *d = alloc(c, sizeof *d);
    *d = (Dict){.cap = cap};
    if (cap) {
        d->keys = alloc_array(c, cap, sizeof(Value));
        d->vals = alloc_array(c, cap, sizeof(Value));
    }
    return d;
}

static Value v_dict(Dict *d) { return (Value){.kind = V_DICT, .dict = d}; }

static const char *type_name(Value v);

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

static uint64_t hash_int(int64_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* A hash that agrees with py_equal (1 == 1.0 == True hash alike); raises
 * Python's TypeError for unhashable keys. */
static uint64_t hash_at(Ctx *c, Value v, int depth) {
    if (depth > TEMPLATE_MAX_DEPTH) raise_error(c, "a key is nested too deeply");
    switch (v.kind) {
    case V_STR:
        return hash_bytes(v.s.p, v.s.n);
    case V_BOOL:
    case V_INT:
        return hash_int(int_of(v));
    case V_FLOAT:
        if (v.f == floor(v.f) && v.f >= -9.2e18 && v.f <= 9.2e18) return hash_int((int64_t)v.f);
        return hash_bytes((const char *)&v.f, sizeof v.f);
    case V_NONE:
        return 0x5bd1e995;
    case V_UNDEFINED:
        return 0x1b873593;
    case V_LIST:
        if (v.list->type == SEQ_RANGE) return hash_int(v.list->range[0] * 31 + v.list->range[1] * 7 + v.list->range[2]);
        if (v.list->type == SEQ_TUPLE) {
            uint64_t h = 0x345678;
            for (size_t i = 0; i < v.list->len; i++) h = (h ^ hash_at(c, v.list->items[i], depth + 1)) * 1000003;
            return h;
        }
        break;
    case V_DICT:
        break;
    default:
        return hash_int((int64_t)(intptr_t)v.list);
    }
    raise_error(c, "unhashable type: '%s'", type_name(v));
}

static uint64_t hash_value(Ctx *c, Value v) { return hash_at(c, v, 0); }

static bool py_equal(Ctx *c, Value a, Value b);

static void dict_reindex(Ctx *c, Dict *d) {
    size_t cap = 16;
    while (cap < d->len * 2 + 2) cap *= 2;
    d->index = alloc_array(c, cap, sizeof *d->index);
    memset(d->index, 0, cap * sizeof *d->index);
    d->index_cap = cap;
    for (size_t i = 0; i < d->len; i++) {
        size_t b = hash_value(c, d->keys[i]) & (cap - 1);
        while (d->index[b]) b = (b + 1) & (cap - 1);
        d->index[b] = (uint32_t)(i + 1);
    }
}

/* The slot of key in d, or -1. */
static ptrdiff_t dict_slot(Ctx *c, const Dict *d, Value key) {
    if (!d->index) {
        bool hashed = false;
        for (size_t i = 0; i < d->len; i++) {
            Value k = d->keys[i];
            /* The common case, a str key, without hashing. */
            if (k.kind == V_STR && key.kind == V_STR) {
                if (str_eq(k.s, key.s)) return (ptrdiff_t)i;
                continue;
            }
            if (!hashed) {
                hash_value(c, key); /* raises for unhashable keys, as Python does */
                hashed = true;
            }
            if (py_equal(c, k, key)) return (ptrdiff_t)i;
        }
        if (!hashed && key.kind != V_STR) hash_value(c, key);
        return -1;
    }
    size_t b = hash_value(c, key) & (d->index_cap - 1);
    while (d->index[b]) {
        size_t i = d->index[b] - 1;
        if (py_equal(c, d->keys[i], key)) return (ptrdiff_t)i;
        b = (b + 1) & (d->index_cap - 1);
    }
    return -1;
}

static Value *dict_get(Ctx *c, const Dict *d, Value key) {
    ptrdiff_t i = dict_slot(c, d, key);
    return i < 0 ? NULL : &d->vals[i];
}

static Value *dict_get_str(Ctx *c, const Dict *d, Str key) { return dict_get(c, d, v_str(key.p, key.n)); }

/* d[key] = val: a new key goes last, an existing one keeps its place. */
static void dict_set(Ctx *c, Dict *d, Value key, Value val) {
    ptrdiff_t i = dict_slot(c, d, key);
    if (i >= 0) {
        d->vals[i] = val;
        return;
    }
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        Value *keys = alloc_array(c, cap, sizeof(Value)), *vals = alloc_array(c, cap, sizeof(Value));
        if (d->len) {
            memcpy(keys, d->keys, d->len * sizeof(Value));
            memcpy(vals, d->vals, d->len * sizeof(Value));
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    if (d->len >= UINT32_MAX - 1) raise_error(c, "a dict has too many items");
    d->keys[d->len] = key;
    d->vals[d->len] = val;
    d->len++;
    if (d->index && d->len * 2 + 2 <= d->index_cap) {
        size_t b = hash_value(c, key) & (d->index_cap - 1);
        while (d->index[b]) b = (b + 1) & (d->index_cap - 1);
        d->index[b] = (uint32_t)d->len;
    } else if (d->len > DICT_LINEAR_MAX) {
        dict_reindex(c, d);
    }
}

/* ---- the interpreter's objects that values point to ---- */

typedef struct Node Node;
typedef struct Scope Scope;
typedef struct Render Render;

/* The state of a for loop, which `loop` shows. Items are produced on
 * demand when the loop has an `if` filter, as jinja2 does: loop.last and
 * loop.length evaluate the filter ahead. */
struct Loop {
    const Node *node; /* the N_FOR */
    Scope *scope;     /* the scope the loop runs in */
    Value *raw;       /* the iterable's items */
    size_t n_raw, raw_pos;
    List *items;    /* the items that passed the filter so far */
    size_t index0;  /* the current item */
    bool all_known; /* items holds every item */
    int depth0;
    Value changed_last; /* loop.changed()'s last arguments (V_MISSING at first) */
};

struct Macro {
    const Node *node; /* the N_MACRO */
    Scope *closure;   /* the scope it was defined in */
};

typedef enum {
    FUNC_RANGE,
    FUNC_DICT,
    FUNC_NAMESPACE,
    FUNC_RAISE_EXCEPTION,
    FUNC_STRFTIME_NOW,
} FuncId;

struct Method {
    Value self;
    int id; /* a MethodId */
};

/* ---- comparing ---- */

/* Python's int == float: exact, so 2**53 + 1 != 2.0**53. */
static bool int_equals_float(int64_t i, double f) {
    return f == floor(f) && f >= -9223372036854775808.0 && f < 9223372036854775808.0 && (int64_t)f == i;
}

static bool seq_types_compare(const List *a, const List *b) {
    if (a->type == b->type) return true;
    return false;
}

/* Python's a == b (depth: how deep in containers we are). */
static bool equal_at(Ctx *c, Value a, Value b, int depth) {
    if (depth > TEMPLATE_MAX_DEPTH) raise_error(c, "values are nested too deeply to compare");
    if (is_number(a) && is_number(b)) {
        if (is_integer(a) && is_integer(b)) return int_of(a) == int_of(b);
        if (a.kind == V_FLOAT && b.kind == V_FLOAT) return a.f == b.f;
        return a.kind == V_FLOAT ? int_equals_float(int_of(b), a.f) : int_equals_float(int_of(a), b.f);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case V_UNDEFINED:
    case V_NONE:
        return true;
    case V_STR:
        return str_eq(a.s, b.s);
    case V_LIST:
        if (!seq_types_compare(a.list, b.list) || a.list->len != b.list->len) return false;
        for (size_t i = 0; i < a.list->len; i++)
            if (!equal_at(c, a.list->items[i], b.list->items[i], depth + 1)) return false;
        return true;
    case V_DICT:
        if (a.dict->len != b.dict->len) return false;
        for (size_t i = 0; i < a.dict->len; i++) {
            bool found = false;
            for (size_t j = 0; j < b.dict->len && !found; j++)
                if (equal_at(c, a.dict->keys[i], b.dict->keys[j], depth + 1)) {
                    if (!equal_at(c, a.dict->vals[i], b.dict->vals[j], depth + 1)) return false;
                    found = true;
                }
            if (!found) return false;
        }
        return true;
    case V_FUNC:
        return a.func == b.func;
    case V_METHOD:
        return a.method == b.method;
    default:
        return a.list == b.list; /* identity for the other objects */
    }
}

static bool py_equal(Ctx *c, Value a, Value b) { return equal_at(c, a, b, 0); }

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } CmpOp;
static const char *const cmp_symbols[] = {"==", "!=", "<", "<=", ">", ">=", "in", "not in"};

static noreturn void raise_undefined(Ctx *c, Value u);

/* Python's a < b, a <= b, a > b or a >= b; raises TypeError for types
 * that do not order. */
static bool order_at(Ctx *c, CmpOp op, Value a, Value b, int depth) {
    if (depth > TEMPLATE_MAX_DEPTH) raise_error(c, "values are nested too deeply to compare");
    if (a.kind == V_UNDEFINED) raise_undefined(c, a);
    if (b.kind == V_UNDEFINED) raise_undefined(c, b);
    int sign = 0;
    if (is_number(a) && is_number(b)) {
        if (is_integer(a) && is_integer(b)) {
            int64_t x = int_of(a), y = int_of(b);
            sign = (x > y) - (x < y);
        } else {
            double x = float_of(a), y = float_of(b);
            if (isnan(x) || isnan(y)) return false;
            sign = (x > y) - (x < y);
        }
    } else if (is_str(a) && is_str(b)) {
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int d = n ? memcmp(a.s.p, b.s.p, n) : 0; /* UTF-8 byte order is code point order */
        sign = d ? (d > 0) - (d < 0) : (a.s.n > b.s.n) - (a.s.n < b.s.n);
    } else if (a.kind == V_LIST && b.kind == V_LIST && a.list->type == b.list->type &&
               (a.list->type == SEQ_LIST || a.list->type == SEQ_TUPLE)) {
        size_t i = 0;
        while (i < a.list->len && i < b.list->len && py_equal(c, a.list->items[i], b.list->items[i])) i++;
        if (i < a.list->len && i < b.list->len) return order_at(c, op, a.list->items[i], b.list->items[i], depth + 1);
        sign = (a.list->len > b.list->len) - (a.list->len < b.list->len);
    } else {
        raise_error(c, "'%s' not supported between instances of '%s' and '%s'", cmp_symbols[op], type_name(a),
                    type_name(b));
    }
    switch (op) {
    case CMP_LT:
        return sign < 0;
    case CMP_LE:
        return sign <= 0;
    case CMP_GT:
        return sign > 0;
    default:
        return sign >= 0;
    }
}

static bool py_order(Ctx *c, CmpOp op, Value a, Value b) { return order_at(c, op, a, b, 0); }

/* ---- names of types ---- */

static const char *const seq_type_names[] = {"list", "tuple", "range", "dict_items", "dict_keys", "dict_values"};

/* Python's type(v).__name__. */
static const char *type_name(Value v) {
    switch (v.kind) {
    case V_UNDEFINED:
        return "Undefined";
    case V_NONE:
        return "NoneType";
    case V_BOOL:
        return "bool";
    case V_INT:
        return "int";
    case V_FLOAT:
        return "float";
    case V_STR:
        return v.markup ? "Markup" : "str";
    case V_LIST:
        return seq_type_names[v.list->type];
    case V_DICT:
        return "dict";
    case V_ITER:
        return v.iter->type_name;
    case V_NAMESPACE:
        return "Namespace";
    case V_LOOP:
        return "LoopContext";
    case V_MACRO:
        return "Macro";
    case V_FUNC:
        return v.func == FUNC_RANGE || v.func == FUNC_DICT ? "type" : "function";
    case V_METHOD:
        return "builtin_function_or_method";
    default:
        return "object";
    }
}

/* jinja2's object_type_repr(): how Undefined's messages name an object. */
static void object_type_repr(char *out, size_t size, Value v) {
    if (v.kind == V_NONE) snprintf(out, size, "None");
    else if (v.kind == V_NAMESPACE) snprintf(out, size, "jinja2.utils.Namespace object");
    else if (v.kind == V_LOOP) snprintf(out, size, "jinja2.runtime.LoopContext object");
    else if (v.kind == V_MACRO) snprintf(out, size, "jinja2.runtime.Macro object");
    else if (v.kind == V_STR && v.markup) snprintf(out, size, "markupsafe.Markup object");
    else snprintf(out, size, "%s object", type_name(v));
}

/* ======================================================================
 * Printing: Python's str() and repr(), and json.dumps
 * ====================================================================== */

/* A growing string in the arena. */
typedef struct {
    Ctx *c;
    char *p;
    size_t n, cap;
} Buf;

static void buf_reserve(Buf *b, size_t extra) {
    if (extra > TEMPLATE_MAX_OUTPUT - b->n)
        raise_error(b->c, "the text would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + extra) cap *= 2;
    char *p = alloc(b->c, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
}

static void buf_add(Buf *b, const char *s, size_t n) {
    if (n == 0) return;
    buf_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void buf_adds(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }
static void buf_addstr(Buf *b, Str s) { buf_add(b, s.p, s.n); }

static void buf_addc(Buf *b, char ch) {
    buf_reserve(b, 1);
    b->p[b->n++] = ch;
}

static void buf_addchar(Buf *b, uint32_t c) {
    char tmp[4];
    buf_add(b, tmp, utf8_put(c, tmp));
}

static void buf_addf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_addf(Buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    buf_add(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* An integer in decimal (printf is slow for the millions a list can hold). */
static void buf_add_int(Buf *b, int64_t i) {
    char digits[24];
    int n = 0;
    uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0) digits[sizeof digits - 1 - n++] = '-';
    buf_add(b, digits + sizeof digits - n, (size_t)n);
}

/* The buffer's text as a str value (the bytes are copied, so the buffer
 * may be reused). */
static Value buf_value(Buf *b) { return new_str(b->c, b->p, b->n); }

/* Python's repr() of a float: the shortest digits that read back as the
 * same double, written as 1e+16, 1000000000000000.0, 0.0001 or 1e-05. */
static void format_float(char out[40], double f) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f > 0 ? "inf" : "-inf");
        return;
    }
    if (f == 0) {
        strcpy(out, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    /* The fewest digits that read back as f: more digits never read back
     * worse, so search for the count. */
    char sci[40];
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(sci, sizeof sci, "%.*e", mid - 1, f);
        if (strtod(sci, NULL) == f) hi = mid;
        else lo = mid + 1;
    }
    snprintf(sci, sizeof sci, "%.*e", lo - 1, f);
    /* sci is [-]d[.ddd]e[+-]xx: take the digits and the exponent apart. */
    char digits[24];
    int n_digits = 0;
    const char *p = sci;
    bool negative = *p == '-';
    if (negative) p++;
    for (; *p != 'e'; p++)
        if (*p != '.') digits[n_digits++] = *p;
    while (n_digits > 1 && digits[n_digits - 1] == '0') n_digits--;
    int exponent = atoi(p + 1), point = exponent + 1; /* the value is 0.<digits> * 10^point */
    char *o = out;
    if (negative) *o++ = '-';
    if (point > 16 || point < -3) {
        *o++ = digits[0];
        if (n_digits > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)n_digits - 1);
            o += n_digits - 1;
        }
        sprintf(o, "e%c%02d", exponent < 0 ? '-' : '+', abs(exponent));
        return;
    }
    if (point <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -point; i++) *o++ = '0';
        memcpy(o, digits, (size_t)n_digits);
        o += n_digits;
    } else if (point >= n_digits) {
        memcpy(o, digits, (size_t)n_digits);
        o += n_digits;
        for (int i = n_digits; i < point; i++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)point);
        o += point;
        *o++ = '.';
        memcpy(o, digits + point, (size_t)(n_digits - point));
        o += n_digits - point;
    }
    *o = '\0';
}

/* Python's repr() of a str. */
static void repr_str(Buf *b, Str s) {
    bool has_single = memchr(s.p, '\'', s.n) != NULL, has_double = memchr(s.p, '"', s.n) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    buf_addc(b, quote);
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        if (c == (uint32_t)quote || c == '\\') {
            buf_addc(b, '\\');
            buf_addc(b, (char)c);
        } else if (c == '\t') buf_adds(b, "\\t");
        else if (c == '\n') buf_adds(b, "\\n");
        else if (c == '\r') buf_adds(b, "\\r");
        else if (py_isprintable(c)) buf_add(b, s.p + i, used);
        else if (c <= 0xFF) buf_addf(b, "\\x%02x", c);
        else if (c <= 0xFFFF) buf_addf(b, "\\u%04x", c);
        else buf_addf(b, "\\U%08x", c);
        i += used;
    }
    buf_addc(b, quote);
}

static void write_value(Render *r, Buf *b, Value v, bool repr, int depth);
static size_t loop_length(Render *r, Loop *l);
static const char *macro_name(const Macro *m);
static const char *method_name(int id);

static void write_items(Render *r, Buf *b, const List *l, int depth) {
    for (size_t i = 0; i < l->len; i++) {
        count_iteration(b->c);
        if (i) buf_adds(b, ", ");
        write_value(r, b, l->items[i], true, depth);
    }
}

static void write_dict(Render *r, Buf *b, const Dict *d, int depth) {
    buf_addc(b, '{');
    for (size_t i = 0; i < d->len; i++) {
        count_iteration(b->c);
        if (i) buf_adds(b, ", ");
        write_value(r, b, d->keys[i], true, depth);
        buf_adds(b, ": ");
        write_value(r, b, d->vals[i], true, depth);
    }
    buf_addc(b, '}');
}

/* Python's str(v) (repr false) or repr(v) into b. */
static void write_value(Render *r, Buf *b, Value v, bool repr, int depth) {
    Ctx *c = b->c;
    if (++depth > TEMPLATE_MAX_DEPTH) raise_error(c, "a value is nested too deeply to print");
    char tmp[40];
    switch (v.kind) {
    case V_UNDEFINED:
        if (repr) buf_adds(b, "Undefined");
        break;
    case V_NONE:
        buf_adds(b, "None");
        break;
    case V_BOOL:
        buf_adds(b, v.b ? "True" : "False");
        break;
    case V_INT:
        buf_add_int(b, v.i);
        break;
    case V_FLOAT:
        format_float(tmp, v.f);
        buf_adds(b, tmp);
        break;
    case V_STR:
        if (!repr) buf_addstr(b, v.s);
        else if (v.markup) {
            buf_adds(b, "Markup(");
            repr_str(b, v.s);
            buf_addc(b, ')');
        } else repr_str(b, v.s);
        break;
    case V_LIST:
        switch (v.list->type) {
        case SEQ_LIST:
            buf_addc(b, '[');
            write_items(r, b, v.list, depth);
            buf_addc(b, ']');
            break;
        case SEQ_TUPLE:
            buf_addc(b, '(');
            write_items(r, b, v.list, depth);
            if (v.list->len == 1) buf_addc(b, ',');
            buf_addc(b, ')');
            break;
        case SEQ_RANGE:
            if (v.list->range[2] == 1)
                buf_addf(b, "range(%" PRId64 ", %" PRId64 ")", v.list->range[0], v.list->range[1]);
            else
                buf_addf(b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", v.list->range[0], v.list->range[1],
                         v.list->range[2]);
            break;
        default:
            buf_adds(b, seq_type_names[v.list->type]);
            buf_adds(b, "([");
            write_items(r, b, v.list, depth);
            buf_adds(b, "])");
        }
        break;
    case V_DICT:
        write_dict(r, b, v.dict, depth);
        break;
    case V_NAMESPACE:
        buf_adds(b, "<Namespace ");
        write_dict(r, b, v.dict, depth);
        buf_addc(b, '>');
        break;
    case V_ITER:
        buf_addf(b, "<%s object>", v.iter->type_name);
        break;
    case V_LOOP:
        buf_addf(b, "<LoopContext %zu/%zu>", v.loop->index0 + 1, loop_length(r, v.loop));
        break;
    case V_MACRO:
        buf_addf(b, "<Macro '%s'>", macro_name(v.macro));
        break;
    case V_FUNC: {
        static const char *const names[] = {"<class 'range'>", "<class 'dict'>", "<class 'jinja2.utils.Namespace'>",
                                            "<function raise_exception>", "<function strftime_now>"};
        buf_adds(b, names[v.func]);
        break;
    }
    case V_METHOD: {
        buf_addf(b, "<built-in method %s of ", method_name(v.method->id));
        char what[64];
        object_type_repr(what, sizeof what, v.method->self);
        buf_addf(b, "%s>", what);
        break;
    }
    default:
        break;
    }
}

/* ---- json.dumps, as transformers' tojson filter calls it ---- */

typedef struct {
    bool ensure_ascii, sort_keys, has_indent;
    Str indent;            /* one level of indentation */
    Str item_sep, key_sep; /* ", " and ": " (or "," and ": " with an indent) */
} JsonStyle;

static void json_str(Buf *b, Str s, bool ensure_ascii) {
    buf_addc(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\' && (ch < 0x80 || !ensure_ascii)) {
            i++;
            continue;
        }
        buf_add(b, s.p + start, i - start);
        size_t used = 1;
        if (ch == '"') buf_adds(b, "\\\"");
        else if (ch == '\\') buf_adds(b, "\\\\");
        else if (ch == '\n') buf_adds(b, "\\n");
        else if (ch == '\r') buf_adds(b, "\\r");
        else if (ch == '\t') buf_adds(b, "\\t");
        else if (ch == '\b') buf_adds(b, "\\b");
        else if (ch == '\f') buf_adds(b, "\\f");
        else if (ch < 0x20) buf_addf(b, "\\u%04x", ch);
        else {
            uint32_t c = next_char(s.p + i, s.n - i, &used);
            if (c >= 0x10000)
                buf_addf(b, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF));
            else buf_addf(b, "\\u%04x", c);
        }
        i += used;
        start = i;
    }
    buf_add(b, s.p + start, s.n - start);
    buf_addc(b, '"');
}

static void json_newline(Buf *b, const JsonStyle *st, int level) {
    buf_addc(b, '\n');
    for (int i = 0; i < level; i++) buf_addstr(b, st->indent);
}

static void json_float(Buf *b, double f) {
    char tmp[40];
    if (isnan(f)) buf_adds(b, "NaN");
    else if (isinf(f)) buf_adds(b, f > 0 ? "Infinity" : "-Infinity");
    else {
        format_float(tmp, f);
        buf_adds(b, tmp);
    }
}

static void sort_values(Ctx *c, Value *keys, size_t *order, size_t n, bool reverse);

static void json_dump(Ctx *c, Buf *b, Value v, const JsonStyle *st, int level) {
    if (level > TEMPLATE_MAX_DEPTH) raise_error(c, "a value is nested too deeply for tojson");
    switch (v.kind) {
    case V_NONE:
        buf_adds(b, "null");
        return;
    case V_BOOL:
        buf_adds(b, v.b ? "true" : "false");
        return;
    case V_INT:
        buf_add_int(b, v.i);
        return;
    case V_FLOAT:
        json_float(b, v.f);
        return;
    case V_STR:
        json_str(b, v.s, st->ensure_ascii);
        return;
    case V_LIST:
        if (v.list->type != SEQ_LIST && v.list->type != SEQ_TUPLE) break;
        if (v.list->len == 0) {
            buf_adds(b, "[]");
            return;
        }
        buf_addc(b, '[');
        for (size_t i = 0; i < v.list->len; i++) {
            count_iteration(c);
            if (i) buf_addstr(b, st->item_sep);
            if (st->has_indent) json_newline(b, st, level + 1);
            json_dump(c, b, v.list->items[i], st, level + 1);
        }
        if (st->has_indent) json_newline(b, st, level);
        buf_addc(b, ']');
        return;
    case V_DICT: {
        const Dict *d = v.dict;
        if (d->len == 0) {
            buf_adds(b, "{}");
            return;
        }
        size_t *order = alloc_array(c, d->len, sizeof *order);
        for (size_t i = 0; i < d->len; i++) order[i] = i;
        if (st->sort_keys) sort_values(c, d->keys, order, d->len, false);
        buf_addc(b, '{');
        for (size_t k = 0; k < d->len; k++) {
            count_iteration(c);
            Value key = d->keys[order[k]];
            if (k) buf_addstr(b, st->item_sep);
            if (st->has_indent) json_newline(b, st, level + 1);
            if (key.kind == V_STR) json_str(b, key.s, st->ensure_ascii);
            else if (key.kind == V_FLOAT) {
                buf_addc(b, '"');
                json_float(b, key.f);
                buf_addc(b, '"');
            } else if (key.kind == V_INT) buf_addf(b, "\"%" PRId64 "\"", key.i);
            else if (key.kind == V_BOOL) buf_adds(b, key.b ? "\"true\"" : "\"false\"");
            else if (key.kind == V_NONE) buf_adds(b, "\"null\"");
            else raise_error(c, "keys must be str, int, float, bool or None, not %s", type_name(key));
            buf_addstr(b, st->key_sep);
            json_dump(c, b, d->vals[order[k]], st, level + 1);
        }
        if (st->has_indent) json_newline(b, st, level);
        buf_addc(b, '}');
        return;
    }
    default:
        break;
    }
    raise_error(c, "Object of type %s is not JSON serializable", type_name(v));
}

/* ======================================================================
 * The lexer: jinja2's, with transformers' trim_blocks and lstrip_blocks
 * ====================================================================== */

typedef enum {
    T_EOF,
    T_DATA,        /* template text */
    T_VAR_BEGIN,   /* {{ */
    T_VAR_END,     /* }} */
    T_BLOCK_BEGIN, /* {% */
    T_BLOCK_END,   /* %} */
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
} TokType;

typedef enum {
    OP_ADD,
    OP_SUB,
    OP_DIV,
    OP_FLOORDIV,
    OP_MUL,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_EQ,
    OP_NE,
    OP_GT,
    OP_GTEQ,
    OP_LT,
    OP_LTEQ,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMICOLON,
} OpId;

/* Longest first, as jinja2's operator regex tries them. */
static const struct {
    const char *text;
    OpId op;
} operators[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},      {"==", OP_EQ},    {"!=", OP_NE},    {">=", OP_GTEQ},  {"<=", OP_LTEQ},
    {"+", OP_ADD},       {"-", OP_SUB},       {"/", OP_DIV},    {"*", OP_MUL},    {"%", OP_MOD},    {"~", OP_TILDE},
    {"[", OP_LBRACKET},  {"]", OP_RBRACKET},  {"(", OP_LPAREN}, {")", OP_RPAREN}, {"{", OP_LBRACE}, {"}", OP_RBRACE},
    {">", OP_GT},        {"<", OP_LT},        {"=", OP_ASSIGN}, {".", OP_DOT},    {":", OP_COLON},  {"|", OP_PIPE},
    {",", OP_COMMA},     {";", OP_SEMICOLON},
};

static const char *op_text(OpId op) {
    for (size_t i = 0; i < sizeof operators / sizeof operators[0]; i++)
        if (operators[i].op == op) return operators[i].text;
    return "?";
}

typedef struct {
    uint8_t type; /* TokType */
    uint8_t op;   /* T_OP: OpId */
    int line;
    Str s;     /* T_DATA, T_NAME; T_STRING: the decoded text */
    int64_t i; /* T_INT */
    double f;  /* T_FLOAT */
} Token;

typedef enum { TAG_VAR, TAG_BLOCK, TAG_COMMENT, TAG_RAW } TagKind;

enum { MAX_BRACKETS = 256 }; /* open brackets within one tag */

typedef struct Template Template;

typedef struct {
    Ctx c;
    Template *t;
    const char *src; /* the text with newlines normalized to \n */
    size_t len;
    size_t pos; /* lexer: the next byte; parser: the current token */
    int line;   /* lexer: the line of src[line_pos] */
    size_t line_pos;
    Token *toks;
    size_t n_toks, cap_toks;
    int depth;        /* nesting of expressions and blocks */
    bool soft;        /* inside an if: an unknown filter or test fails only when run */
    int loops;        /* for loops around the statement (break and continue need one) */
    char unknown[96]; /* the first unknown filter or test, reported after parsing */
    int unknown_line;
    size_t unknown_pos; /* and its token */
} Parser;

/* The line of src[pos] (positions are asked for in increasing order). */
static int line_at(Parser *p, size_t pos) {
    for (; p->line_pos < pos; p->line_pos++)
        if (p->src[p->line_pos] == '\n') p->line++;
    return p->line;
}

static Token *add_token(Parser *p, TokType type, size_t pos) {
    if (p->n_toks == p->cap_toks) {
        size_t cap = p->cap_toks ? p->cap_toks * 2 : 256;
        Token *toks = alloc_array(&p->c, cap, sizeof *toks);
        if (p->n_toks) memcpy(toks, p->toks, p->n_toks * sizeof *toks);
        p->toks = toks;
        p->cap_toks = cap;
    }
    Token *t = &p->toks[p->n_toks++];
    *t = (Token){.type = (uint8_t)type, .line = line_at(p, pos)};
    return t;
}

static noreturn void lex_error(Parser *p, size_t pos, const char *msg) { raise_at(&p->c, line_at(p, pos), "%s", msg); }

/* The white space (as Python's \s) that starts at s[i], or 0. */
static size_t space_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    size_t used;
    uint32_t c = next_char(s + i, n - i, &used);
    return py_isspace(c) ? used : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
    size_t k;
    while ((k = space_at(s, n, i)) != 0) i += k;
    return i;
}

/* Python's str.rstrip(): the length without trailing white space. */
static size_t rstrip_len(const char *s, size_t n) {
    while (n > 0) {
        size_t start = prev_char_start(s, n), used;
        if (!py_isspace(next_char(s + start, n - start, &used))) break;
        n = start;
    }
    return n;
}

/* The text before a tag, with the tag's whitespace control applied:
 * "-" strips all white space before the tag; otherwise lstrip_blocks strips
 * the spaces and tabs (any white space but \n) between the start of the
 * line and a block or comment tag, when nothing else precedes it on the
 * line. line_starting says whether the text starts a line. */
static Str strip_before_tag(Str text, char sign, bool is_var, bool line_starting) {
    if (sign == '-') {
        text.n = rstrip_len(text.p, text.n);
        return text;
    }
    if (sign == '+' || is_var) return text;
    const char *nl = NULL;
    for (size_t i = text.n; i > 0; i--)
        if (text.p[i - 1] == '\n') {
            nl = text.p + i - 1;
            break;
        }
    size_t line_start = nl ? (size_t)(nl - text.p) + 1 : 0;
    if (line_start == 0 && !line_starting) return text;
    if (line_start < text.n && skip_space(text.p, text.n, line_start) == text.n) text.n = line_start;
    return text;
}

static void add_data(Parser *p, Str text, size_t pos) {
    if (text.n == 0) return;
    Token *t = add_token(p, T_DATA, pos);
    t->s = text;
}

/* Matches {%[-+]? \s* raw \s* (-%}\s* | %}) at s[i]; returns its end or 0. */
static size_t match_raw_begin(const char *s, size_t n, size_t i) {
    i += 2;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    i = skip_space(s, n, i);
    if (n - i < 3 || memcmp(s + i, "raw", 3) != 0) return 0;
    i = skip_space(s, n, i + 3);
    if (n - i >= 3 && memcmp(s + i, "-%}", 3) == 0) return skip_space(s, n, i + 3);
    if (n - i >= 2 && memcmp(s + i, "%}", 2) == 0) return i + 2;
    return 0;
}

/* Finds the {% endraw %} that closes a raw block, from s[i]: sets *start
 * to the tag's start, *sign to its whitespace control and returns its end
 * (0 if there is none). */
static size_t find_raw_end(const char *s, size_t n, size_t i, size_t *start, char *sign) {
    for (; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t k = i + 2;
        char sg = 0;
        if (k < n && (s[k] == '-' || s[k] == '+')) sg = s[k++];
        k = skip_space(s, n, k);
        if (n - k < 6 || memcmp(s + k, "endraw", 6) != 0) continue;
        k = skip_space(s, n, k + 6);
        size_t end = 0;
        if (n - k >= 3 && memcmp(s + k, "+%}", 3) == 0) end = k + 3;
        else if (n - k >= 3 && memcmp(s + k, "-%}", 3) == 0) end = skip_space(s, n, k + 3);
        else if (n - k >= 2 && memcmp(s + k, "%}", 2) == 0) end = k + 2 + (k + 2 < n && s[k + 2] == '\n');
        if (end) {
            *start = i;
            *sign = sg;
            return end;
        }
    }
    return 0;
}

/* Finds the end of a comment from s[i]: "+#}", "-#}" and white space, or
 * "#}" and one newline (trim_blocks). Returns the end, or 0. */
static size_t find_comment_end(const char *s, size_t n, size_t i) {
    for (; i + 1 < n; i++) {
        if ((s[i] == '+' || s[i] == '-') && i + 2 < n && s[i + 1] == '#' && s[i + 2] == '}')
            return s[i] == '+' ? i + 3 : skip_space(s, n, i + 3);
        if (s[i] == '#' && s[i + 1] == '}') return i + 2 + (i + 2 < n && s[i + 2] == '\n');
    }
    return 0;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Digits with single underscores between them, (\d+_)*\d+, from s[i]:
 * returns the end, or i when there is no digit. */
static size_t scan_digits(const char *s, size_t n, size_t i) {
    if (i >= n || !is_digit(s[i])) return i;
    while (i < n) {
        if (is_digit(s[i])) i++;
        else if (s[i] == '_' && i + 1 < n && is_digit(s[i + 1])) i += 2;
        else break;
    }
    return i;
}

/* jinja2's float rule at s[i] (not after a '.'): returns the end or 0. */
static size_t match_float(const char *s, size_t n, size_t i) {
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t j = scan_digits(s, n, i);
    if (j == i) return 0;
    size_t frac_end = 0;
    if (j < n && s[j] == '.') {
        size_t k = scan_digits(s, n, j + 1);
        if (k > j + 1) frac_end = k;
    }
    size_t e = frac_end ? frac_end : j;
    if (e < n && (s[e] == 'e' || s[e] == 'E')) {
        size_t k = e + 1;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        size_t m = scan_digits(s, n, k);
        if (m > k) return m;
    }
    return frac_end;
}

static int digit_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if ((ch | 32) >= 'a' && (ch | 32) <= 'f') return (ch | 32) - 'a' + 10;
    return 99;
}

/* jinja2's integer rule at s[i]: 0b.., 0o.., 0x.. (with single
 * underscores), a decimal, or zeros. Returns the end and the value. */
static size_t match_int(Parser *p, const char *s, size_t n, size_t i, int64_t *value) {
    int base = 10;
    size_t j = i, digits_from = i;
    if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1])) {
        base = (s[i + 1] | 32) == 'b' ? 2 : (s[i + 1] | 32) == 'o' ? 8 : 16;
        size_t k = i + 2;
        while (k < n) {
            size_t d = s[k] == '_' ? k + 1 : k;
            if (d < n && digit_value(s[d]) < base) k = d + 1;
            else break;
        }
        if (k > i + 2) {
            j = k;
            digits_from = i + 2;
        } else base = 10;
    }
    if (base == 10) {
        if (s[i] >= '1' && s[i] <= '9') {
            j = i + 1;
            while (j < n) {
                size_t d = s[j] == '_' ? j + 1 : j;
                if (d < n && is_digit(s[d])) j = d + 1;
                else break;
            }
        } else if (s[i] == '0') {
            j = i + 1;
            while (j < n) {
                size_t d = s[j] == '_' ? j + 1 : j;
                if (d < n && s[d] == '0') j = d + 1;
                else break;
            }
        } else return 0;
        digits_from = i;
    }
    uint64_t v = 0;
    for (size_t k = digits_from; k < j; k++) {
        if (s[k] == '_') continue;
        int d = digit_value(s[k]);
        if (v > (UINT64_C(9223372036854775807) - (uint64_t)d) / (uint64_t)base)
            lex_error(p, i, "integer literal is larger than 64 bits");
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *value = (int64_t)v;
    return j;
}

/* A name: \w characters (letters, digits, _ and non-ASCII letters and
 * numbers) not starting with a digit. Returns the end, or i. */
static size_t match_name(Parser *p, const char *s, size_t n, size_t i) {
    size_t j = i;
    bool first = true;
    while (j < n) {
        unsigned char ch = (unsigned char)s[j];
        size_t used = 1;
        if (ch < 0x80) {
            if (!(ch == '_' || is_digit((char)ch) || ((ch | 32) >= 'a' && (ch | 32) <= 'z'))) break;
        } else {
            uint32_t c = next_char(s + j, n - j, &used);
            unsigned cls = unicode_class(c);
            if (!(cls & (UNICODE_LETTER | UNICODE_NUMBER))) break;
            if (first && !(cls & UNICODE_LETTER)) lex_error(p, j, "invalid character in identifier");
        }
        first = false;
        j += used;
    }
    return j;
}

static int hex_value(const char *s, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = digit_value(s[i]);
        if (d > 15) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decodes a string literal's body as jinja2 does: Python's unicode-escape
 * codec over the text with non-ASCII characters written as \x, \u or \U
 * escapes (so a backslash before a non-ASCII character escapes only the
 * backslash of that escape). */
static Str decode_string(Parser *p, size_t at, const char *s, size_t n) {
    Buf b = {.c = &p->c};
    buf_reserve(&b, n + 1);
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            buf_addc(&b, s[i++]);
            continue;
        }
        /* the regex guarantees a character after every backslash */
        size_t used;
        uint32_t c = next_char(s + i + 1, n - i - 1, &used);
        i += 1 + used;
        if (c >= 0x80) {
            buf_addc(&b, '\\'); /* "\é" is "\\xe9" to the codec: a backslash, then "xe9" */
            if (c <= 0xFF) buf_addf(&b, "x%02x", c);
            else if (c <= 0xFFFF) buf_addf(&b, "u%04x", c);
            else buf_addf(&b, "U%08x", c);
            continue;
        }
        switch (c) {
        case '\n':
            break;
        case '\\':
            buf_addc(&b, '\\');
            break;
        case '\'':
            buf_addc(&b, '\'');
            break;
        case '"':
            buf_addc(&b, '"');
            break;
        case 'a':
            buf_addc(&b, '\a');
            break;
        case 'b':
            buf_addc(&b, '\b');
            break;
        case 'f':
            buf_addc(&b, '\f');
            break;
        case 'n':
            buf_addc(&b, '\n');
            break;
        case 'r':
            buf_addc(&b, '\r');
            break;
        case 't':
            buf_addc(&b, '\t');
            break;
        case 'v':
            buf_addc(&b, '\v');
            break;
        case 'x':
        case 'u':
        case 'U': {
            size_t want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            int v = n - i >= want ? hex_value(s + i, want) : -1;
            if (want == 8 && n - i >= 8) {
                long long big = 0;
                for (size_t k = 0; k < 8; k++) {
                    int d = digit_value(s[i + k]);
                    big = d > 15 || big < 0 ? -1 : big * 16 + d;
                }
                if (big > 0x10FFFF) lex_error(p, at, "illegal Unicode character");
                v = (int)big;
            }
            if (v < 0)
                lex_error(p, at,
                          c == 'x'   ? "truncated \\xXX escape"
                          : c == 'u' ? "truncated \\uXXXX escape"
                                     : "truncated \\UXXXXXXXX escape");
            if (v >= 0xD800 && v <= 0xDFFF) lex_error(p, at, "a string literal holds a surrogate code point");
            buf_addchar(&b, (uint32_t)v);
            i += want;
            break;
        }
        case 'N':
            lex_error(p, at, "\\N{...} escapes are not supported");
        default:
            if (c >= '0' && c <= '7') {
                uint32_t v = c - '0';
                for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) v = v * 8 + (uint32_t)(s[i++] - '0');
                buf_addchar(&b, v);
            } else {
                buf_addc(&b, '\\'); /* an unknown escape stays as it is */
                buf_addc(&b, (char)c);
            }
        }
    }
    return (Str){b.p, b.n};
}

/* Lexes the inside of a {{ }} or {% %} tag from s[i]; returns the
 * position after its end tag (or n when the template ends first). */
static size_t lex_tag(Parser *p, size_t i, TagKind kind, bool *line_starting) {
    const char *s = p->src;
    size_t n = p->len;
    char brackets[MAX_BRACKETS];
    int depth = 0;
    while (i < n) {
        /* The end tag, unless a bracket is open. */
        if (depth == 0) {
            size_t end = 0;
            if (kind == TAG_BLOCK) {
                if (n - i >= 3 && memcmp(s + i, "+%}", 3) == 0) end = i + 3;
                else if (n - i >= 3 && memcmp(s + i, "-%}", 3) == 0) end = skip_space(s, n, i + 3);
                else if (n - i >= 2 && memcmp(s + i, "%}", 2) == 0) end = i + 2 + (i + 2 < n && s[i + 2] == '\n');
            } else {
                if (n - i >= 3 && memcmp(s + i, "-}}", 3) == 0) end = skip_space(s, n, i + 3);
                else if (n - i >= 2 && memcmp(s + i, "}}", 2) == 0) end = i + 2;
            }
            if (end) {
                add_token(p, kind == TAG_BLOCK ? T_BLOCK_END : T_VAR_END, i);
                *line_starting = s[end - 1] == '\n';
                return end;
            }
        }
        size_t k = space_at(s, n, i);
        if (k) {
            i = skip_space(s, n, i);
            continue;
        }
        size_t end = match_float(s, n, i);
        if (end) {
            char tmp[64];
            size_t m = 0;
            for (size_t j = i; j < end && m < sizeof tmp - 1; j++)
                if (s[j] != '_') tmp[m++] = s[j];
            tmp[m] = '\0';
            Token *t = add_token(p, T_FLOAT, i);
            t->f = strtod(tmp, NULL);
            i = end;
            continue;
        }
        if (is_digit(s[i])) {
            int64_t v;
            end = match_int(p, s, n, i, &v);
            Token *t = add_token(p, T_INT, i);
            t->i = v;
            i = end;
            continue;
        }
        end = match_name(p, s, n, i);
        if (end > i) {
            Token *t = add_token(p, T_NAME, i);
            t->s = (Str){s + i, end - i};
            i = end;
            continue;
        }
        if (s[i] == '\'' || s[i] == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != s[i]) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            if (j < n) {
                Token *t = add_token(p, T_STRING, i);
                t->s = decode_string(p, i, s + i + 1, j - i - 1);
                i = j + 1;
                continue;
            }
        }
        size_t o = 0;
        while (o < sizeof operators / sizeof operators[0] &&
               strncmp(s + i, operators[o].text, strlen(operators[o].text)) != 0)
            o++;
        if (o == sizeof operators / sizeof operators[0]) {
            char msg[64];
            if (s[i] >= 0x20 && s[i] < 0x7F) snprintf(msg, sizeof msg, "unexpected character '%c'", s[i]);
            else snprintf(msg, sizeof msg, "unexpected character (byte 0x%02x)", (unsigned char)s[i]);
            lex_error(p, i, msg);
        }
        OpId op = operators[o].op;
        if (op == OP_LBRACE || op == OP_LPAREN || op == OP_LBRACKET) {
            if (depth == MAX_BRACKETS) lex_error(p, i, "brackets are nested too deeply");
            brackets[depth++] = op == OP_LBRACE ? '}' : op == OP_LPAREN ? ')' : ']';
        } else if (op == OP_RBRACE || op == OP_RPAREN || op == OP_RBRACKET) {
            char msg[64];
            if (depth == 0) {
                snprintf(msg, sizeof msg, "unexpected '%c'", s[i]);
                lex_error(p, i, msg);
            }
            if (brackets[depth - 1] != s[i]) {
                snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", s[i], brackets[depth - 1]);
                lex_error(p, i, msg);
            }
            depth--;
        }
        Token *t = add_token(p, T_OP, i);
        t->op = (uint8_t)op;
        i += strlen(operators[o].text);
    }
    return n;
}

/* Turns the whole template into tokens. */
static void lex(Parser *p) {
    const char *s = p->src;
    size_t n = p->len, pos = 0;
    bool line_starting = true; /* whether the last thing matched ended a line */
    while (pos < n) {
        /* The next {{, {% or {#. */
        size_t q = pos;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) {
            add_data(p, (Str){s + pos, n - pos}, pos);
            break;
        }
        char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        TagKind kind = s[q + 1] == '{' ? TAG_VAR : s[q + 1] == '#' ? TAG_COMMENT : TAG_BLOCK;
        size_t tag_end = q + 2 + (sign != 0);
        if (kind == TAG_BLOCK) {
            size_t raw_end = match_raw_begin(s, n, q);
            if (raw_end) {
                kind = TAG_RAW;
                tag_end = raw_end;
            }
        }
        add_data(p, strip_before_tag((Str){s + pos, q - pos}, sign, kind == TAG_VAR, line_starting), pos);
        line_starting = s[tag_end - 1] == '\n';
        pos = tag_end;
        if (kind == TAG_COMMENT) {
            size_t end = find_comment_end(s, n, pos);
            if (!end) lex_error(p, pos, "missing end of comment tag");
            line_starting = s[end - 1] == '\n';
            pos = end;
        } else if (kind == TAG_RAW) {
            size_t start;
            char end_sign;
            size_t end = find_raw_end(s, n, pos, &start, &end_sign);
            if (!end) lex_error(p, pos, "missing end of raw directive");
            add_data(p, strip_before_tag((Str){s + pos, start - pos}, end_sign, false, line_starting), pos);
            line_starting = s[end - 1] == '\n';
            pos = end;
        } else {
            add_token(p, kind == TAG_VAR ? T_VAR_BEGIN : T_BLOCK_BEGIN, q);
            pos = lex_tag(p, pos, kind, &line_starting);
        }
    }
    add_token(p, T_EOF, n);
}

/* ======================================================================
 * Names of filters, tests and methods
 * ====================================================================== */

typedef enum {
    FI_ABS,
    FI_ATTR,
    FI_BATCH,
    FI_CAPITALIZE,
    FI_CENTER,
    FI_DEFAULT,
    FI_DICTSORT,
    FI_ESCAPE,
    FI_FIRST,
    FI_FLOAT,
    FI_FORMAT,
    FI_INDENT,
    FI_INT,
    FI_ITEMS,
    FI_JOIN,
    FI_LAST,
    FI_LENGTH,
    FI_LIST,
    FI_LOWER,
    FI_MAP,
    FI_MAX,
    FI_MIN,
    FI_REJECT,
    FI_REJECTATTR,
    FI_REPLACE,
    FI_REVERSE,
    FI_ROUND,
    FI_SAFE,
    FI_SELECT,
    FI_SELECTATTR,
    FI_SLICE,
    FI_SORT,
    FI_STRING,
    FI_SUM,
    FI_TITLE,
    FI_TOJSON,
    FI_TRIM,
    FI_TRUNCATE,
    FI_UNIQUE,
    FI_UPPER,
    FI_WORDCOUNT,
    FI_UNSUPPORTED, /* a jinja2 filter this interpreter does not have: an error when run */
} FilterId;

static const struct {
    const char *name;
    FilterId id;
} filters[] = {
    {"abs", FI_ABS},
    {"attr", FI_ATTR},
    {"batch", FI_BATCH},
    {"capitalize", FI_CAPITALIZE},
    {"center", FI_CENTER},
    {"count", FI_LENGTH},
    {"d", FI_DEFAULT},
    {"default", FI_DEFAULT},
    {"dictsort", FI_DICTSORT},
    {"e", FI_ESCAPE},
    {"escape", FI_ESCAPE},
    {"first", FI_FIRST},
    {"float", FI_FLOAT},
    {"format", FI_FORMAT},
    {"indent", FI_INDENT},
    {"int", FI_INT},
    {"items", FI_ITEMS},
    {"join", FI_JOIN},
    {"last", FI_LAST},
    {"length", FI_LENGTH},
    {"list", FI_LIST},
    {"lower", FI_LOWER},
    {"map", FI_MAP},
    {"max", FI_MAX},
    {"min", FI_MIN},
    {"reject", FI_REJECT},
    {"rejectattr", FI_REJECTATTR},
    {"replace", FI_REPLACE},
    {"reverse", FI_REVERSE},
    {"round", FI_ROUND},
    {"safe", FI_SAFE},
    {"select", FI_SELECT},
    {"selectattr", FI_SELECTATTR},
    {"slice", FI_SLICE},
    {"sort", FI_SORT},
    {"string", FI_STRING},
    {"sum", FI_SUM},
    {"title", FI_TITLE},
    {"tojson", FI_TOJSON},
    {"trim", FI_TRIM},
    {"truncate", FI_TRUNCATE},
    {"unique", FI_UNIQUE},
    {"upper", FI_UPPER},
    {"wordcount", FI_WORDCOUNT},
    {"filesizeformat", FI_UNSUPPORTED},
    {"forceescape", FI_UNSUPPORTED},
    {"groupby", FI_UNSUPPORTED},
    {"pprint", FI_UNSUPPORTED},
    {"random", FI_UNSUPPORTED},
    {"striptags", FI_UNSUPPORTED},
    {"urlencode", FI_UNSUPPORTED},
    {"urlize", FI_UNSUPPORTED},
    {"wordwrap", FI_UNSUPPORTED},
    {"xmlattr", FI_UNSUPPORTED},
};

typedef enum {
    TE_BOOLEAN,
    TE_CALLABLE,
    TE_DEFINED,
    TE_DIVISIBLEBY,
    TE_EQ,
    TE_ESCAPED,
    TE_EVEN,
    TE_FALSE,
    TE_FILTER,
    TE_FLOAT,
    TE_GE,
    TE_GT,
    TE_IN,
    TE_INTEGER,
    TE_ITERABLE,
    TE_LE,
    TE_LOWER,
    TE_LT,
    TE_MAPPING,
    TE_NE,
    TE_NONE,
    TE_NUMBER,
    TE_ODD,
    TE_SAMEAS,
    TE_SEQUENCE,
    TE_STRING,
    TE_TEST,
    TE_TRUE,
    TE_UNDEFINED,
    TE_UPPER,
} TestId;

static const struct {
    const char *name;
    TestId id;
} tests[] = {
    {"boolean", TE_BOOLEAN},
    {"callable", TE_CALLABLE},
    {"defined", TE_DEFINED},
    {"divisibleby", TE_DIVISIBLEBY},
    {"==", TE_EQ},
    {"eq", TE_EQ},
    {"equalto", TE_EQ},
    {"escaped", TE_ESCAPED},
    {"even", TE_EVEN},
    {"false", TE_FALSE},
    {"filter", TE_FILTER},
    {"float", TE_FLOAT},
    {">=", TE_GE},
    {"ge", TE_GE},
    {">", TE_GT},
    {"gt", TE_GT},
    {"greaterthan", TE_GT},
    {"in", TE_IN},
    {"integer", TE_INTEGER},
    {"iterable", TE_ITERABLE},
    {"<=", TE_LE},
    {"le", TE_LE},
    {"lower", TE_LOWER},
    {"<", TE_LT},
    {"lt", TE_LT},
    {"lessthan", TE_LT},
    {"mapping", TE_MAPPING},
    {"!=", TE_NE},
    {"ne", TE_NE},
    {"none", TE_NONE},
    {"number", TE_NUMBER},
    {"odd", TE_ODD},
    {"sameas", TE_SAMEAS},
    {"sequence", TE_SEQUENCE},
    {"string", TE_STRING},
    {"test", TE_TEST},
    {"true", TE_TRUE},
    {"undefined", TE_UNDEFINED},
    {"upper", TE_UPPER},
};

static int find_filter(Str name) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (str_is(name, filters[i].name)) return (int)filters[i].id;
    return -1;
}

/* A filter's name (the first of its names), for messages. */
static const char *filter_name(FilterId id) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (filters[i].id == id) return filters[i].name;
    return "filter";
}

static int find_test(Str name) {
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (str_is(name, tests[i].name)) return (int)tests[i].id;
    return -1;
}

/* The methods (and other public attributes) of str, dict, list and tuple,
 * and of jinja2's loop object. Accessing one gives a bound method; the
 * ones the immutable sandbox forbids give an undefined value that raises
 * SecurityError when called. The ones marked unsupported exist in Python
 * but fail here when called. */
typedef enum {
    M_CAPITALIZE,
    M_CASEFOLD,
    M_CENTER,
    M_COUNT,
    M_ENDSWITH,
    M_FIND,
    M_FORMAT,
    M_INDEX,
    M_ISALNUM,
    M_ISALPHA,
    M_ISDECIMAL,
    M_ISDIGIT,
    M_ISLOWER,
    M_ISNUMERIC,
    M_ISSPACE,
    M_ISTITLE,
    M_ISUPPER,
    M_JOIN,
    M_LJUST,
    M_LOWER,
    M_LSTRIP,
    M_PARTITION,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    M_REPLACE,
    M_RFIND,
    M_RINDEX,
    M_RJUST,
    M_RPARTITION,
    M_RSPLIT,
    M_RSTRIP,
    M_SPLIT,
    M_SPLITLINES,
    M_STARTSWITH,
    M_STRIP,
    M_SWAPCASE,
    M_TITLE,
    M_UPPER,
    M_ZFILL,
    M_ENCODE,
    M_EXPANDTABS,
    M_FORMAT_MAP,
    M_ISASCII,
    M_ISIDENTIFIER,
    M_ISPRINTABLE,
    M_MAKETRANS,
    M_TRANSLATE,
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_COPY,
    M_FROMKEYS,
    M_CLEAR,
    M_POP,
    M_POPITEM,
    M_SETDEFAULT,
    M_UPDATE,
    M_APPEND,
    M_EXTEND,
    M_INSERT,
    M_REMOVE,
    M_REVERSE,
    M_SORT,
    M_CYCLE,
    M_CHANGED,
} MethodId;

enum { ON_STR = 1, ON_DICT = 2, ON_LIST = 4, ON_TUPLE = 8, ON_LOOP = 16 };

static const struct {
    const char *name;
    unsigned on;     /* the types that have it */
    unsigned unsafe; /* the types on which the sandbox forbids it */
    bool unsupported;
} methods[] = {
    [M_CAPITALIZE] = {"capitalize", ON_STR, 0, false},
    [M_CASEFOLD] = {"casefold", ON_STR, 0, false},
    [M_CENTER] = {"center", ON_STR, 0, false},
    [M_COUNT] = {"count", ON_STR | ON_LIST | ON_TUPLE, 0, false},
    [M_ENDSWITH] = {"endswith", ON_STR, 0, false},
    [M_FIND] = {"find", ON_STR, 0, false},
    [M_FORMAT] = {"format", ON_STR, 0, false},
    [M_INDEX] = {"index", ON_STR | ON_LIST | ON_TUPLE, 0, false},
    [M_ISALNUM] = {"isalnum", ON_STR, 0, false},
    [M_ISALPHA] = {"isalpha", ON_STR, 0, false},
    [M_ISDECIMAL] = {"isdecimal", ON_STR, 0, false},
    [M_ISDIGIT] = {"isdigit", ON_STR, 0, false},
    [M_ISLOWER] = {"islower", ON_STR, 0, false},
    [M_ISNUMERIC] = {"isnumeric", ON_STR, 0, false},
    [M_ISSPACE] = {"isspace", ON_STR, 0, false},
    [M_ISTITLE] = {"istitle", ON_STR, 0, false},
    [M_ISUPPER] = {"isupper", ON_STR, 0, false},
    [M_JOIN] = {"join", ON_STR, 0, false},
    [M_LJUST] = {"ljust", ON_STR, 0, false},
    [M_LOWER] = {"lower", ON_STR, 0, false},
    [M_LSTRIP] = {"lstrip", ON_STR, 0, false},
    [M_PARTITION] = {"partition", ON_STR, 0, false},
    [M_REMOVEPREFIX] = {"removeprefix", ON_STR, 0, false},
    [M_REMOVESUFFIX] = {"removesuffix", ON_STR, 0, false},
    [M_REPLACE] = {"replace", ON_STR, 0, false},
    [M_RFIND] = {"rfind", ON_STR, 0, false},
    [M_RINDEX] = {"rindex", ON_STR, 0, false},
    [M_RJUST] = {"rjust", ON_STR, 0, false},
    [M_RPARTITION] = {"rpartition", ON_STR, 0, false},
    [M_RSPLIT] = {"rsplit", ON_STR, 0, false},
    [M_RSTRIP] = {"rstrip", ON_STR, 0, false},
    [M_SPLIT] = {"split", ON_STR, 0, false},
    [M_SPLITLINES] = {"splitlines", ON_STR, 0, false},
    [M_STARTSWITH] = {"startswith", ON_STR, 0, false},
    [M_STRIP] = {"strip", ON_STR, 0, false},
    [M_SWAPCASE] = {"swapcase", ON_STR, 0, false},
    [M_TITLE] = {"title", ON_STR, 0, false},
    [M_UPPER] = {"upper", ON_STR, 0, false},
    [M_ZFILL] = {"zfill", ON_STR, 0, false},
    [M_ENCODE] = {"encode", ON_STR, 0, true},
    [M_EXPANDTABS] = {"expandtabs", ON_STR, 0, true},
    [M_FORMAT_MAP] = {"format_map", ON_STR, 0, true},
    [M_ISASCII] = {"isascii", ON_STR, 0, true},
    [M_ISIDENTIFIER] = {"isidentifier", ON_STR, 0, true},
    [M_ISPRINTABLE] = {"isprintable", ON_STR, 0, true},
    [M_MAKETRANS] = {"maketrans", ON_STR, 0, true},
    [M_TRANSLATE] = {"translate", ON_STR, 0, true},
    [M_GET] = {"get", ON_DICT, 0, false},
    [M_ITEMS] = {"items", ON_DICT, 0, false},
    [M_KEYS] = {"keys", ON_DICT, 0, false},
    [M_VALUES] = {"values", ON_DICT, 0, false},
    [M_COPY] = {"copy", ON_DICT | ON_LIST, 0, false},
    [M_FROMKEYS] = {"fromkeys", ON_DICT, 0, true},
    [M_CLEAR] = {"clear", ON_DICT | ON_LIST, ON_DICT, false},
    [M_POP] = {"pop", ON_DICT | ON_LIST, ON_DICT, false},
    [M_POPITEM] = {"popitem", ON_DICT, ON_DICT, false},
    [M_SETDEFAULT] = {"setdefault", ON_DICT, ON_DICT, false},
    [M_UPDATE] = {"update", ON_DICT, ON_DICT, false},
    [M_APPEND] = {"append", ON_LIST, ON_LIST, false},
    [M_EXTEND] = {"extend", ON_LIST, ON_LIST, false},
    [M_INSERT] = {"insert", ON_LIST, ON_LIST, false},
    [M_REMOVE] = {"remove", ON_LIST, ON_LIST, false},
    [M_REVERSE] = {"reverse", ON_LIST, ON_LIST, false},
    [M_SORT] = {"sort", ON_LIST, ON_LIST, false},
    [M_CYCLE] = {"cycle", ON_LOOP, 0, false},
    [M_CHANGED] = {"changed", ON_LOOP, 0, false},
};

static int find_method(Str name) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (str_is(name, methods[i].name)) return (int)i;
    return -1;
}

static const char *method_name(int id) { return methods[id].name; }

/* ======================================================================
 * The parser: jinja2's grammar, into a tree of Nodes
 * ====================================================================== */

typedef enum {
    /* expressions */
    N_CONST,
    N_NAME,
    N_GETATTR,
    N_GETITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NOT,
    N_NEG,
    N_POS,
    N_AND,
    N_OR,
    N_BINOP,
    N_COMPARE,
    N_OPERAND,
    N_CONCAT,
    N_CONDEXPR,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_PAIR,
    N_KEYWORD,
    N_NSREF,
    /* statements */
    N_TEXT,
    N_PRINT,
    N_IF,
    N_FOR,
    N_SET,
    N_SETBLOCK,
    N_MACRO,
    N_BREAK,
    N_CONTINUE,
    N_WITH,
    N_FILTERBLOCK,
    N_BODY,
} NodeType;

typedef struct {
    Node **at;
    size_t n;
} Nodes;

/* One node of the tree. Which fields a type uses:
 *   N_CONST value | N_NAME name | N_GETATTR a.value (op: MethodId or -1)
 *   N_GETITEM a[b] | N_SLICE a:b:c (any NULL) | N_CALL a(list, kw)
 *   N_FILTER a|value(list, kw), a NULL in a filter block (op: FilterId or -1)
 *   N_TEST a is value(list, kw) (op: TestId or -1) | N_NOT, N_NEG, N_POS a
 *   N_AND, N_OR, N_BINOP a op b | N_COMPARE a then N_OPERAND (op: CmpOp, a)
 *   N_CONCAT list | N_CONDEXPR b if a else c | N_LIST, N_TUPLE list
 *   N_DICT list of N_PAIR a: b | N_KEYWORD name=a | N_NSREF name.value
 *   N_TEXT value | N_PRINT a | N_IF a, body list, else b (N_IF or N_BODY)
 *   N_FOR target a in b if c, body list, else d (op: recursive)
 *   N_SET a = b | N_SETBLOCK a, filter b, body list
 *   N_MACRO name(kw: N_KEYWORD with default a or NULL), body list
 *   N_WITH kw: N_SET nodes, body list | N_FILTERBLOCK filter b, body list
 *   N_BODY list */
struct Node {
    NodeType type;
    int line;
    int op;
    int name;
    Value value;
    Node *a, *b, *c, *d;
    Nodes list;
    Nodes kw;
    /* The body of N_FOR, N_MACRO, N_WITH, N_SETBLOCK and N_FILTERBLOCK, and
     * a for loop's else (d), run in a frame of their own: these are the names
     * it sets that start undefined (see analyse_frame). */
    const int *locals;
    size_t n_locals;
    /* An expression jinja2 may evaluate when it compiles the template
     * (see eval_constant). print_root: the whole of a {{ }}. */
    bool constant, print_root;
};

/* Names every template knows, interned first so their ids are fixed. */
enum {
    NAME_LOOP,
    NAME_VARARGS,
    NAME_KWARGS,
    NAME_CALLER,
    NAME_RANGE,
    NAME_DICT,
    NAME_NAMESPACE,
    NAME_RAISE_EXCEPTION,
    NAME_STRFTIME_NOW, /* in FuncId order */
    N_PREDEFINED_NAMES
};
static const char *const predefined_names[] = {"loop", "varargs",   "kwargs",          "caller",      "range",
                                               "dict", "namespace", "raise_exception", "strftime_now"};

struct Template {
    Chunk *chunks; /* every node and string */
    Nodes body;
    const int *locals; /* the names the template's top level sets that start undefined */
    size_t n_locals;
    Str *names; /* interned names, by id */
    size_t n_names, cap_names;
    uint32_t *name_index; /* hash index: id + 1 per bucket */
    size_t name_index_cap;
};

/* The id of a name, interning it on first sight. */
static int intern(Ctx *c, Template *t, Str name) {
    if (t->n_names * 2 + 2 > t->name_index_cap) {
        size_t cap = t->name_index_cap ? t->name_index_cap * 2 : 64;
        t->name_index = alloc_array(c, cap, sizeof *t->name_index);
        memset(t->name_index, 0, cap * sizeof *t->name_index);
        t->name_index_cap = cap;
        for (size_t i = 0; i < t->n_names; i++) {
            size_t b = hash_bytes(t->names[i].p, t->names[i].n) & (cap - 1);
            while (t->name_index[b]) b = (b + 1) & (cap - 1);
            t->name_index[b] = (uint32_t)(i + 1);
        }
    }
    size_t b = hash_bytes(name.p, name.n) & (t->name_index_cap - 1);
    while (t->name_index[b]) {
        size_t id = t->name_index[b] - 1;
        if (str_eq(t->names[id], name)) return (int)id;
        b = (b + 1) & (t->name_index_cap - 1);
    }
    if (t->n_names == t->cap_names) {
        size_t cap = t->cap_names ? t->cap_names * 2 : 64;
        Str *names = alloc_array(c, cap, sizeof *names);
        if (t->n_names) memcpy(names, t->names, t->n_names * sizeof *names);
        t->names = names;
        t->cap_names = cap;
    }
    t->names[t->n_names] = name;
    t->name_index[b] = (uint32_t)(t->n_names + 1);
    return (int)t->n_names++;
}

/* The id of a name if the template uses it, else -1. */
static int find_name(const Template *t, Str name) {
    size_t b = hash_bytes(name.p, name.n) & (t->name_index_cap - 1);
    while (t->name_index[b]) {
        size_t id = t->name_index[b] - 1;
        if (str_eq(t->names[id], name)) return (int)id;
        b = (b + 1) & (t->name_index_cap - 1);
    }
    return -1;
}

static Node *new_node(Parser *p, NodeType type, int line) {
    Node *n = alloc(&p->c, sizeof *n);
    *n = (Node){.type = type, .line = line, .op = -1, .name = -1};
    return n;
}

/* A growing list of nodes while parsing. */
typedef struct {
    Node **at;
    size_t n, cap;
} NodeList;

static void nodes_push(Parser *p, NodeList *l, Node *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        Node **at = alloc_array(&p->c, cap, sizeof *at);
        if (l->n) memcpy(at, l->at, l->n * sizeof *at);
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = n;
}

static Nodes nodes_done(NodeList l) { return (Nodes){l.at, l.n}; }

static Token *cur(Parser *p) { return &p->toks[p->pos]; }
static Token *peek(Parser *p) { return &p->toks[p->pos + 1 < p->n_toks ? p->pos + 1 : p->pos]; }

static Token *advance(Parser *p) {
    Token *t = cur(p);
    if (t->type != T_EOF) p->pos++;
    return t;
}

static bool is_op(const Token *t, OpId op) { return t->type == T_OP && t->op == op; }
static bool is_name(const Token *t, const char *name) { return t->type == T_NAME && str_is(t->s, name); }
static bool at_op(Parser *p, OpId op) { return is_op(cur(p), op); }
static bool at_name(Parser *p, const char *name) { return is_name(cur(p), name); }

static bool skip_op(Parser *p, OpId op) {
    if (!at_op(p, op)) return false;
    advance(p);
    return true;
}

static bool skip_name(Parser *p, const char *name) {
    if (!at_name(p, name)) return false;
    advance(p);
    return true;
}

/* How jinja2 describes a token in its messages. */
static void describe(char *out, size_t size, const Token *t) {
    static const char *const what[] = {
        [T_EOF] = "end of template",
        [T_DATA] = "template data / text",
        [T_VAR_BEGIN] = "begin of print statement",
        [T_VAR_END] = "end of print statement",
        [T_BLOCK_BEGIN] = "begin of statement block",
        [T_BLOCK_END] = "end of statement block",
        [T_STRING] = "string",
        [T_INT] = "integer",
        [T_FLOAT] = "float",
    };
    if (t->type == T_NAME) snprintf(out, size, "%.*s", (int)(t->s.n < 64 ? t->s.n : 64), t->s.p);
    else if (t->type == T_OP) snprintf(out, size, "%s", op_text((OpId)t->op));
    else snprintf(out, size, "%s", what[t->type]);
}

static noreturn void parse_error(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static noreturn void parse_error(Parser *p, const char *fmt, ...) {
    char msg[MAX_ERROR_TEXT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    raise_at(&p->c, cur(p)->line, "%s", msg);
}

/* Fails with "expected X, got Y" unless the current token is what is
 * described (want); expected is how to name it. */
static noreturn void expected(Parser *p, const char *want) {
    char got[80];
    describe(got, sizeof got, cur(p));
    if (cur(p)->type == T_EOF) parse_error(p, "unexpected end of template, expected '%s'", want);
    parse_error(p, "expected '%s', got '%s'", want, got);
}

static Token *expect_op(Parser *p, OpId op) {
    if (!at_op(p, op)) expected(p, op_text(op));
    return advance(p);
}

static Token *expect_type(Parser *p, TokType type) {
    static const char *const what[] = {
        [T_VAR_END] = "end of print statement", [T_BLOCK_END] = "end of statement block", [T_NAME] = "name"};
    if (cur(p)->type != type) expected(p, what[type]);
    return advance(p);
}

static Token *expect_name(Parser *p, const char *name) {
    if (!at_name(p, name)) expected(p, name);
    return advance(p);
}

static void enter(Parser *p) {
    if (++p->depth > TEMPLATE_MAX_DEPTH) parse_error(p, "the template is nested too deeply");
}

/* One more level for a node that wraps the last one (a + b + c ... is as
 * deep as it is long); the caller gives the levels back when done. */
static void wrap(Parser *p, int *wraps) {
    enter(p);
    (*wraps)++;
}

static Node *parse_expression(Parser *p, bool with_condexpr);
static Node *parse_tuple(Parser *p, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens);
static Node *parse_primary(Parser *p);
static Node *parse_postfix(Parser *p, Node *node);
static Node *parse_unary(Parser *p, bool with_filter);

static Node *parse_condexpr(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    size_t start = p->pos;
    Node *expr1 = parse_expression(p, false);
    bool soft = p->soft;
    /* `a if b`: a counts as inside an if too */
    if (at_name(p, "if") && p->unknown[0] && p->unknown_pos >= start) p->unknown[0] = '\0';
    while (skip_name(p, "if")) {
        wrap(p, &wraps);
        p->soft = true; /* a filter that does not exist fails only if it is run */
        Node *n = new_node(p, N_CONDEXPR, line);
        n->b = expr1;
        n->a = parse_expression(p, false);
        if (skip_name(p, "else")) n->c = parse_condexpr(p);
        expr1 = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    p->soft = soft;
    return expr1;
}

static Node *parse_and(Parser *p);
static Node *parse_not(Parser *p);
static Node *parse_compare(Parser *p);
static Node *parse_math1(Parser *p);

static Node *parse_or(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_and(p);
    while (skip_name(p, "or")) {
        wrap(p, &wraps);
        Node *n = new_node(p, N_OR, line);
        n->a = left;
        n->b = parse_and(p);
        left = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_and(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_not(p);
    while (skip_name(p, "and")) {
        wrap(p, &wraps);
        Node *n = new_node(p, N_AND, line);
        n->a = left;
        n->b = parse_not(p);
        left = n;
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_not(Parser *p) {
    if (at_name(p, "not")) {
        Node *n = new_node(p, N_NOT, advance(p)->line);
        enter(p);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static Node *parse_compare(Parser *p) {
    int line = cur(p)->line;
    Node *expr = parse_math1(p);
    NodeList ops = {0};
    for (;;) {
        Token *t = cur(p);
        int op = -1;
        if (t->type == T_OP && t->op == OP_EQ) op = CMP_EQ;
        else if (t->type == T_OP && t->op == OP_NE) op = CMP_NE;
        else if (t->type == T_OP && t->op == OP_LT) op = CMP_LT;
        else if (t->type == T_OP && t->op == OP_LTEQ) op = CMP_LE;
        else if (t->type == T_OP && t->op == OP_GT) op = CMP_GT;
        else if (t->type == T_OP && t->op == OP_GTEQ) op = CMP_GE;
        else if (is_name(t, "in")) op = CMP_IN;
        else if (is_name(t, "not") && is_name(peek(p), "in")) {
            advance(p);
            op = CMP_NOTIN;
        } else break;
        advance(p);
        Node *operand = new_node(p, N_OPERAND, t->line);
        operand->op = op;
        operand->a = parse_math1(p);
        nodes_push(p, &ops, operand);
        line = cur(p)->line;
    }
    if (ops.n == 0) return expr;
    Node *n = new_node(p, N_COMPARE, line);
    n->a = expr;
    n->list = nodes_done(ops);
    return n;
}

static Node *binop(Parser *p, int line, OpId op, Node *a, Node *b) {
    Node *n = new_node(p, N_BINOP, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static Node *parse_concat(Parser *p);
static Node *parse_math2(Parser *p);
static Node *parse_pow(Parser *p);

static Node *parse_math1(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_concat(p);
    while (at_op(p, OP_ADD) || at_op(p, OP_SUB)) {
        wrap(p, &wraps);
        OpId op = (OpId)advance(p)->op;
        left = binop(p, line, op, left, parse_concat(p));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_concat(Parser *p) {
    int line = cur(p)->line;
    Node *first = parse_math2(p);
    if (!at_op(p, OP_TILDE)) return first;
    NodeList args = {0};
    nodes_push(p, &args, first);
    while (skip_op(p, OP_TILDE)) nodes_push(p, &args, parse_math2(p));
    Node *n = new_node(p, N_CONCAT, line);
    n->list = nodes_done(args);
    return n;
}

static Node *parse_math2(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_pow(p);
    while (at_op(p, OP_MUL) || at_op(p, OP_DIV) || at_op(p, OP_FLOORDIV) || at_op(p, OP_MOD)) {
        wrap(p, &wraps);
        OpId op = (OpId)advance(p)->op;
        left = binop(p, line, op, left, parse_pow(p));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_pow(Parser *p) {
    int wraps = 0;
    int line = cur(p)->line;
    Node *left = parse_unary(p, true);
    while (skip_op(p, OP_POW)) {
        wrap(p, &wraps);
        left = binop(p, line, OP_POW, left, parse_unary(p, true));
        line = cur(p)->line;
    }
    p->depth -= wraps;
    return left;
}

static Node *parse_filter_expr(Parser *p, Node *node);

static Node *parse_unary(Parser *p, bool with_filter) {
    enter(p);
    int line = cur(p)->line;
    Node *node;
    if (at_op(p, OP_SUB) || at_op(p, OP_ADD)) {
        node = new_node(p, at_op(p, OP_SUB) ? N_NEG : N_POS, line);
        advance(p);
        node->a = parse_unary(p, false);
    } else node = parse_primary(p);
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    p->depth--;
    return node;
}

static Node *parse_list(Parser *p) {
    Node *n = new_node(p, N_LIST, expect_op(p, OP_LBRACKET)->line);
    NodeList items = {0};
    while (!at_op(p, OP_RBRACKET)) {
        if (items.n) expect_op(p, OP_COMMA);
        if (at_op(p, OP_RBRACKET)) break;
        nodes_push(p, &items, parse_expression(p, true));
    }
    expect_op(p, OP_RBRACKET);
    n->list = nodes_done(items);
    return n;
}

static Node *parse_dict(Parser *p) {
    Node *n = new_node(p, N_DICT, expect_op(p, OP_LBRACE)->line);
    NodeList items = {0};
    while (!at_op(p, OP_RBRACE)) {
        if (items.n) expect_op(p, OP_COMMA);
        if (at_op(p, OP_RBRACE)) break;
        Node *key = parse_expression(p, true);
        expect_op(p, OP_COLON);
        Node *pair = new_node(p, N_PAIR, key->line);
        pair->a = key;
        pair->b = parse_expression(p, true);
        nodes_push(p, &items, pair);
    }
    expect_op(p, OP_RBRACE);
    n->list = nodes_done(items);
    return n;
}

static Node *parse_primary(Parser *p) {
    Token *t = cur(p);
    Node *n;
    if (t->type == T_NAME) {
        advance(p);
        n = new_node(p, N_CONST, t->line);
        if (str_is(t->s, "true") || str_is(t->s, "True")) n->value = v_bool(true);
        else if (str_is(t->s, "false") || str_is(t->s, "False")) n->value = v_bool(false);
        else if (str_is(t->s, "none") || str_is(t->s, "None")) n->value = v_none();
        else {
            n->type = N_NAME;
            n->name = intern(&p->c, p->t, t->s);
        }
    } else if (t->type == T_STRING) {
        /* Adjacent strings are one string, as in Python. */
        Buf b = {.c = &p->c};
        while (cur(p)->type == T_STRING) buf_addstr(&b, advance(p)->s);
        n = new_node(p, N_CONST, t->line);
        n->value = v_str(b.p ? b.p : "", b.n);
    } else if (t->type == T_INT || t->type == T_FLOAT) {
        advance(p);
        n = new_node(p, N_CONST, t->line);
        n->value = t->type == T_INT ? v_int(t->i) : v_float(t->f);
    } else if (is_op(t, OP_LPAREN)) {
        advance(p);
        n = parse_tuple(p, false, true, NULL, true);
        expect_op(p, OP_RPAREN);
    } else if (is_op(t, OP_LBRACKET)) {
        n = parse_list(p);
    } else if (is_op(t, OP_LBRACE)) {
        n = parse_dict(p);
    } else {
        char what[80];
        describe(what, sizeof what, t);
        parse_error(p, "unexpected '%s'", what);
    }
    return n;
}

/* A tuple (a, b), or one expression when there is no comma. extra_end
 * names a word that also ends it (the "in" of a for loop). */
static Node *parse_tuple(Parser *p, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens) {
    int line = cur(p)->line;
    NodeList args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect_op(p, OP_COMMA);
        Token *t = cur(p);
        if (t->type == T_VAR_END || t->type == T_BLOCK_END || is_op(t, OP_RPAREN) ||
            (extra_end && is_name(t, extra_end)))
            break;
        nodes_push(p, &args, simplified ? parse_primary(p) : parse_expression(p, with_condexpr));
        if (!at_op(p, OP_COMMA)) break;
        is_tuple = true;
        line = cur(p)->line;
    }
    if (!is_tuple) {
        if (args.n) return args.at[0];
        if (!explicit_parens) {
            char what[80];
            describe(what, sizeof what, cur(p));
            parse_error(p, "expected an expression, got '%s'", what);
        }
    }
    Node *n = new_node(p, N_TUPLE, line);
    n->list = nodes_done(args);
    return n;
}

static Node *parse_expression(Parser *p, bool with_condexpr) {
    enter(p);
    Node *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return n;
}

/* One subscript: an expression or a slice a:b:c. */
static Node *parse_subscribed(Parser *p) {
    int line = cur(p)->line;
    Node *parts[3] = {NULL, NULL, NULL};
    if (at_op(p, OP_COLON)) advance(p);
    else {
        Node *node = parse_expression(p, true);
        if (!at_op(p, OP_COLON)) return node;
        advance(p);
        parts[0] = node;
    }
    if (!at_op(p, OP_COLON) && !at_op(p, OP_RBRACKET) && !at_op(p, OP_COMMA)) parts[1] = parse_expression(p, true);
    if (skip_op(p, OP_COLON))
        if (!at_op(p, OP_RBRACKET) && !at_op(p, OP_COMMA)) parts[2] = parse_expression(p, true);
    Node *n = new_node(p, N_SLICE, line);
    n->a = parts[0];
    n->b = parts[1];
    n->c = parts[2];
    return n;
}

/* Whether jinja2 can run a filter when it compiles the template: a known
 * one that does not see the context, applied to something. */
static bool is_literal_filter(const Node *n) {
    return n->a && n->op >= 0 && n->op != FI_MAP && n->op != FI_SELECT && n->op != FI_REJECT &&
           n->op != FI_SELECTATTR && n->op != FI_REJECTATTR && n->op != FI_UNSUPPORTED;
}

/* Whether an expression is made of literals only (no names, no calls,
 * no filters that see the context). */
static bool is_literal(const Node *n) {
    if (!n) return true;
    if (n->type == N_NAME || n->type == N_CALL || n->type >= N_TEXT) return false;
    if (n->type == N_FILTER && !is_literal_filter(n)) return false;
    if (n->type == N_TEST && n->op < 0) return false;
    if (!is_literal(n->a) || !is_literal(n->b) || !is_literal(n->c) || !is_literal(n->d)) return false;
    for (size_t i = 0; i < n->list.n; i++)
        if (!is_literal(n->list.at[i])) return false;
    for (size_t i = 0; i < n->kw.n; i++)
        if (!is_literal(n->kw.at[i])) return false;
    return true;
}

/* Marks the expressions jinja2 may evaluate differently when it compiles
 * the template (see eval_constant): those holding a slice with literal
 * bounds. Returns whether n is one. */
static bool mark_foldable(Node *n) {
    if (!n) return false;
    bool foldable = n->type == N_GETITEM && n->b->type == N_SLICE && is_literal(n->b);
    Node *children[4] = {n->a, n->b, n->c, n->d};
    for (int i = 0; i < 4; i++) foldable |= mark_foldable(children[i]);
    for (size_t i = 0; i < n->list.n; i++) foldable |= mark_foldable(n->list.at[i]);
    for (size_t i = 0; i < n->kw.n; i++) foldable |= mark_foldable(n->kw.at[i]);
    n->constant = foldable && n->type < N_TEXT && n->type != N_SLICE && n->type != N_PAIR && n->type != N_KEYWORD &&
                  n->type != N_OPERAND;
    return foldable;
}

static Node *parse_subscript(Parser *p, Node *node) {
    Token *t = advance(p);
    if (t->type == T_OP && t->op == OP_DOT) {
        Token *attr = advance(p);
        if (attr->type == T_NAME) {
            Node *n = new_node(p, N_GETATTR, t->line);
            n->a = node;
            n->value = v_str(attr->s.p, attr->s.n);
            n->op = find_method(attr->s);
            return n;
        }
        if (attr->type != T_INT) {
            p->pos--;
            parse_error(p, "expected name or number");
        }
        Node *n = new_node(p, N_GETITEM, t->line);
        n->a = node;
        n->b = new_node(p, N_CONST, attr->line);
        n->b->value = v_int(attr->i);
        return n;
    }
    /* t is '[' */
    NodeList args = {0};
    while (!at_op(p, OP_RBRACKET)) {
        if (args.n) expect_op(p, OP_COMMA);
        nodes_push(p, &args, parse_subscribed(p));
    }
    expect_op(p, OP_RBRACKET);
    Node *n = new_node(p, N_GETITEM, t->line);
    n->a = node;
    if (args.n == 1) n->b = args.at[0];
    else {
        n->b = new_node(p, N_TUPLE, t->line);
        n->b->list = nodes_done(args);
    }
    return n;
}

/* The arguments of a call: positional, then name=value. */
static void parse_call_args(Parser *p, Node *n) {
    Token *open = expect_op(p, OP_LPAREN);
    NodeList args = {0}, kw = {0};
    bool need_comma = false;
    while (!at_op(p, OP_RPAREN)) {
        if (need_comma) {
            expect_op(p, OP_COMMA);
            if (at_op(p, OP_RPAREN)) break;
        }
        if (at_op(p, OP_MUL) || at_op(p, OP_POW)) parse_error(p, "*args and **kwargs in calls are not supported");
        if (cur(p)->type == T_NAME && is_op(peek(p), OP_ASSIGN)) {
            Token *name = advance(p);
            advance(p);
            Node *k = new_node(p, N_KEYWORD, name->line);
            k->name = intern(&p->c, p->t, name->s);
            k->a = parse_expression(p, true);
            k->line = k->a->line;
            nodes_push(p, &kw, k);
        } else {
            if (kw.n) raise_at(&p->c, open->line, "invalid syntax for function call expression");
            nodes_push(p, &args, parse_expression(p, true));
        }
        need_comma = true;
    }
    expect_op(p, OP_RPAREN);
    n->list = nodes_done(args);
    n->kw = nodes_done(kw);
}

static Node *parse_call(Parser *p, Node *callee) {
    Node *n = new_node(p, N_CALL, cur(p)->line);
    n->a = callee;
    parse_call_args(p, n);
    return n;
}

static Node *parse_postfix(Parser *p, Node *node) {
    int wraps = 0;
    for (;;) {
        if (at_op(p, OP_DOT) || at_op(p, OP_LBRACKET)) node = parse_subscript(p, node);
        else if (at_op(p, OP_LPAREN)) node = parse_call(p, node);
        else break;
        wrap(p, &wraps);
    }
    p->depth -= wraps;
    return node;
}

/* Notes a filter or test that does not exist outside an if (where it
 * fails only when run). jinja2 reports it when compiling, after parsing:
 * a syntax error further on comes first. */
static void unknown_name(Parser *p, int line, const char *what, Str name) {
    if (p->unknown[0]) return;
    snprintf(p->unknown, sizeof p->unknown, "no %s named '%.*s'", what, (int)(name.n < 64 ? name.n : 64), name.p);
    p->unknown_line = line;
    p->unknown_pos = p->pos;
}

/* A dotted filter or test name, "name" or "a.b". */
static Str parse_dotted_name(Parser *p) {
    Token *t = expect_type(p, T_NAME);
    Str name = t->s;
    if (!at_op(p, OP_DOT)) return name;
    Buf b = {.c = &p->c};
    buf_addstr(&b, name);
    while (skip_op(p, OP_DOT)) {
        buf_addc(&b, '.');
        buf_addstr(&b, expect_type(p, T_NAME)->s);
    }
    return (Str){b.p, b.n};
}

/* One or more filters |name(args) applied to node (NULL for a filter
 * block's body); start_inline: the first has no '|' before it. */
static Node *parse_filter(Parser *p, Node *node, bool start_inline) {
    int wraps = 0;
    while (at_op(p, OP_PIPE) || start_inline) {
        wrap(p, &wraps);
        if (!start_inline) advance(p);
        int line = cur(p)->line;
        Str name = parse_dotted_name(p);
        Node *n = new_node(p, N_FILTER, line);
        n->a = node;
        n->value = v_str(name.p, name.n);
        n->op = find_filter(name);
        if (n->op < 0 && !p->soft) unknown_name(p, line, "filter", name);
        if (at_op(p, OP_LPAREN)) parse_call_args(p, n);
        node = n;
        start_inline = false;
    }
    p->depth -= wraps;
    return node;
}

static Node *parse_test(Parser *p, Node *node) {
    Token *is = advance(p);
    bool negated = skip_name(p, "not");
    Str name = parse_dotted_name(p);
    Node *n = new_node(p, N_TEST, is->line);
    n->a = node;
    n->value = v_str(name.p, name.n);
    n->op = find_test(name);
    if (n->op < 0 && !p->soft) unknown_name(p, is->line, "test", name);
    Token *t = cur(p);
    if (is_op(t, OP_LPAREN)) parse_call_args(p, n);
    else if ((t->type == T_NAME || t->type == T_STRING || t->type == T_INT || t->type == T_FLOAT ||
              is_op(t, OP_LBRACKET) || is_op(t, OP_LBRACE)) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        /* One argument without parentheses: `x is divisibleby 3`. */
        if (is_name(t, "is")) parse_error(p, "you cannot chain multiple tests with is");
        NodeList args = {0};
        nodes_push(p, &args, parse_postfix(p, parse_primary(p)));
        n->list = nodes_done(args);
    }
    if (!negated) return n;
    Node *not = new_node(p, N_NOT, is->line);
    not ->a = n;
    return not ;
}

static Node *parse_filter_expr(Parser *p, Node *node) {
    int wraps = 0;
    for (;;) {
        if (at_op(p, OP_PIPE)) node = parse_filter(p, node, false);
        else if (at_name(p, "is")) node = parse_test(p, node);
        else if (at_op(p, OP_LPAREN)) node = parse_call(p, node);
        else break;
        wrap(p, &wraps);
    }
    p->depth -= wraps;
    return node;
}

/* ---- statements ---- */

static Nodes parse_statements(Parser *p, const char *const *end_names, bool drop_needle);
static Nodes subparse(Parser *p, const char *const *end_names);

/* Checks that target can be assigned to: a name (not a constant) or a
 * tuple of such. */
static void check_target(Parser *p, Node *target) {
    if (target->type == N_TUPLE) {
        for (size_t i = 0; i < target->list.n; i++) check_target(p, target->list.at[i]);
        return;
    }
    if (target->type != N_NAME && target->type != N_NSREF) {
        static const char *const what[] = {[N_CONST] = "const", [N_GETATTR] = "getattr", [N_GETITEM] = "getitem",
                                           [N_LIST] = "list",   [N_DICT] = "dict",       [N_CALL] = "call"};
        const char *w =
            target->type < sizeof what / sizeof what[0] && what[target->type] ? what[target->type] : "expression";
        raise_at(&p->c, target->line, "can't assign to '%s'", w);
    }
}

static Node *parse_assign_target(Parser *p, bool with_tuple, bool name_only, const char *extra_end,
                                 bool with_namespace) {
    Node *target;
    if (with_namespace && is_op(peek(p), OP_DOT)) {
        Token *ns = expect_type(p, T_NAME);
        advance(p);
        Token *attr = expect_type(p, T_NAME);
        target = new_node(p, N_NSREF, ns->line);
        target->name = intern(&p->c, p->t, ns->s);
        target->value = v_str(attr->s.p, attr->s.n);
    } else if (name_only) {
        Token *t = expect_type(p, T_NAME);
        target = new_node(p, N_NAME, t->line);
        target->name = intern(&p->c, p->t, t->s);
    } else {
        target = with_tuple ? parse_tuple(p, true, true, extra_end, false) : parse_primary(p);
    }
    check_target(p, target);
    return target;
}

static bool target_has_loop(const Node *target) {
    if (target->type == N_NAME) return target->name == NAME_LOOP;
    for (size_t i = 0; i < target->list.n; i++)
        if (target->type == N_TUPLE && target_has_loop(target->list.at[i])) return true;
    return false;
}

/* Whether a statement (or one inside it) assigns to the name `loop`. */
static bool sets_loop(const Node *n) {
    if (!n) return false;
    if ((n->type == N_SET || n->type == N_SETBLOCK || n->type == N_FOR) && target_has_loop(n->a)) return true;
    for (size_t i = 0; i < n->kw.n; i++)
        if (n->type == N_WITH && target_has_loop(n->kw.at[i]->a)) return true;
    for (size_t i = 0; i < n->list.n; i++)
        if (n->list.at[i]->type >= N_TEXT && sets_loop(n->list.at[i])) return true;
    return (n->b && n->b->type >= N_TEXT && sets_loop(n->b)) || (n->d && sets_loop(n->d));
}

static Node *parse_for(Parser *p) {
    Node *n = new_node(p, N_FOR, expect_name(p, "for")->line);
    n->a = parse_assign_target(p, true, false, "in", false);
    expect_name(p, "in");
    n->b = parse_tuple(p, false, false, "recursive", false);
    bool soft = p->soft;
    p->soft = false;
    if (skip_name(p, "if")) n->c = parse_expression(p, true);
    n->op = skip_name(p, "recursive");
    static const char *const ends[] = {"endfor", "else", NULL};
    p->loops++;
    n->list = parse_statements(p, ends, false);
    p->loops--;
    if (str_is(advance(p)->s, "else")) {
        static const char *const endfor[] = {"endfor", NULL};
        int loops = p->loops;
        p->loops = 0; /* the else block is not inside the loop */
        n->d = new_node(p, N_BODY, cur(p)->line);
        n->d->list = parse_statements(p, endfor, true);
        p->loops = loops;
    }
    p->soft = soft;
    if (sets_loop(n)) raise_at(&p->c, n->line, "can't assign to the special loop variable in a for loop");
    return n;
}

static Node *parse_if(Parser *p) {
    Node *result = new_node(p, N_IF, expect_name(p, "if")->line), *node = result;
    bool soft = p->soft;
    p->soft = true;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    for (;;) {
        node->a = parse_tuple(p, false, false, NULL, false);
        node->list = parse_statements(p, ends, false);
        Token *t = advance(p);
        if (str_is(t->s, "elif")) {
            node->b = new_node(p, N_IF, cur(p)->line);
            node = node->b;
            continue;
        }
        if (str_is(t->s, "else")) {
            node->b = new_node(p, N_BODY, cur(p)->line);
            node->b->list = parse_statements(p, endif, true);
        }
        break;
    }
    p->soft = soft;
    return result;
}

static Node *parse_set(Parser *p) {
    int line = advance(p)->line;
    Node *target = parse_assign_target(p, true, false, NULL, true);
    if (skip_op(p, OP_ASSIGN)) {
        Node *n = new_node(p, N_SET, line);
        n->a = target;
        n->b = parse_tuple(p, false, true, NULL, false);
        return n;
    }
    Node *n = new_node(p, N_SETBLOCK, line);
    n->a = target;
    n->b = parse_filter(p, NULL, false);
    static const char *const ends[] = {"endset", NULL};
    bool soft = p->soft;
    p->soft = false;
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

/* Whether a macro's body uses the name id (varargs, kwargs, caller). */
static bool uses_name(const Node *n, int id) {
    if (!n) return false;
    if (n->type == N_NAME && n->name == id) return true;
    if (uses_name(n->a, id) || uses_name(n->b, id) || uses_name(n->c, id) || uses_name(n->d, id)) return true;
    for (size_t i = 0; i < n->list.n; i++)
        if (uses_name(n->list.at[i], id)) return true;
    for (size_t i = 0; i < n->kw.n; i++)
        if (uses_name(n->kw.at[i], id)) return true;
    return false;
}

enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2 };

static Node *parse_macro(Parser *p) {
    Node *n = new_node(p, N_MACRO, advance(p)->line);
    Node *name = parse_assign_target(p, true, true, NULL, false);
    n->name = name->name;
    n->value = new_str(&p->c, p->t->names[n->name].p, p->t->names[n->name].n);
    expect_op(p, OP_LPAREN);
    NodeList params = {0};
    bool defaults = false;
    while (!at_op(p, OP_RPAREN)) {
        if (params.n) expect_op(p, OP_COMMA);
        Node *arg = parse_assign_target(p, true, true, NULL, false);
        Node *param = new_node(p, N_KEYWORD, arg->line);
        param->name = arg->name;
        if (skip_op(p, OP_ASSIGN)) {
            param->a = parse_expression(p, true);
            defaults = true;
        } else if (defaults) parse_error(p, "non-default argument follows default argument");
        nodes_push(p, &params, param);
    }
    expect_op(p, OP_RPAREN);
    n->kw = nodes_done(params);
    static const char *const ends[] = {"endmacro", NULL};
    bool soft = p->soft;
    int loops = p->loops;
    p->soft = false;
    p->loops = 0;
    n->list = parse_statements(p, ends, true);
    p->loops = loops;
    p->soft = soft;
    Node body = {.list = n->list};
    n->op = (uses_name(&body, NAME_VARARGS) ? MACRO_VARARGS : 0) | (uses_name(&body, NAME_KWARGS) ? MACRO_KWARGS : 0);
    if (uses_name(&body, NAME_CALLER)) parse_error(p, "call blocks (caller) are not supported");
    return n;
}

static Node *parse_with(Parser *p) {
    Node *n = new_node(p, N_WITH, advance(p)->line);
    NodeList sets = {0};
    while (cur(p)->type != T_BLOCK_END) {
        if (sets.n) expect_op(p, OP_COMMA);
        Node *set = new_node(p, N_SET, cur(p)->line);
        set->a = parse_assign_target(p, true, false, NULL, false);
        expect_op(p, OP_ASSIGN);
        set->b = parse_expression(p, true);
        nodes_push(p, &sets, set);
    }
    n->kw = nodes_done(sets);
    static const char *const ends[] = {"endwith", NULL};
    bool soft = p->soft;
    p->soft = false;
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

static Node *parse_filter_block(Parser *p) {
    Node *n = new_node(p, N_FILTERBLOCK, advance(p)->line);
    bool soft = p->soft;
    p->soft = false;
    n->b = parse_filter(p, NULL, true);
    static const char *const ends[] = {"endfilter", NULL};
    n->list = parse_statements(p, ends, true);
    p->soft = soft;
    return n;
}

static Node *parse_statement(Parser *p) {
    Token *t = cur(p);
    if (t->type != T_NAME) parse_error(p, "tag name expected");
    enter(p);
    Node *n;
    if (is_name(t, "for")) n = parse_for(p);
    else if (is_name(t, "if")) n = parse_if(p);
    else if (is_name(t, "set")) n = parse_set(p);
    else if (is_name(t, "macro")) n = parse_macro(p);
    else if (is_name(t, "with")) n = parse_with(p);
    else if (is_name(t, "filter")) n = parse_filter_block(p);
    else if (is_name(t, "print")) {
        /* {% print a, b %} prints each expression */
        n = new_node(p, N_BODY, advance(p)->line);
        NodeList items = {0};
        while (cur(p)->type != T_BLOCK_END) {
            if (items.n) expect_op(p, OP_COMMA);
            Node *print = new_node(p, N_PRINT, cur(p)->line);
            print->a = parse_expression(p, true);
            nodes_push(p, &items, print);
        }
        n->list = nodes_done(items);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (p->loops == 0) raise_at(&p->c, t->line, "'%.*s' outside loop", (int)t->s.n, t->s.p);
        n = new_node(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, advance(p)->line);
    } else if (is_name(t, "generation")) {
        /* transformers' {% generation %} marks assistant text; it renders its
         * body (in a frame of its own, as a call block's) */
        n = new_node(p, N_WITH, advance(p)->line);
        static const char *const ends[] = {"endgeneration", NULL};
        n->list = parse_statements(p, ends, true);
    } else if (is_name(t, "call") || is_name(t, "block") || is_name(t, "extends") || is_name(t, "include") ||
               is_name(t, "import") || is_name(t, "from") || is_name(t, "autoescape") || is_name(t, "do")) {
        parse_error(p, "the '%.*s' tag is not supported in chat templates", (int)t->s.n, t->s.p);
    } else {
        parse_error(p, "unknown tag '%.*s'", (int)(t->s.n < 64 ? t->s.n : 64), t->s.p);
    }
    p->depth--;
    return n;
}

/* ---- which names start undefined ----
 *
 * jinja2 decides at compile time where each variable lives (its
 * idtracking): every frame (the template, a loop body, a macro, ...) owns
 * the names its own statements set, and a name it sets without having read
 * it first, and that no enclosing frame owns, starts undefined when the
 * frame starts, even if a variable of that name was passed in. So
 *   {% for m in messages %}{{ n }}{% endfor %}{% set n = 5 %}
 * prints nothing for n: the loop reads the template's n before it is set.
 * Everything else scoping does follows from looking names up frame by
 * frame, innermost first; this analysis only finds those names. */

typedef enum { REF_RESOLVE, REF_ALIAS, REF_UNDEFINED, REF_PARAM } RefKind;

typedef struct Symbols Symbols;
struct Symbols {
    const Symbols *parent;
    int *names; /* the frame's names and how each starts */
    uint8_t *kinds;
    size_t n, cap;
    int *stores; /* the names it sets */
    size_t n_stores, cap_stores;
};

static ptrdiff_t sym_find_own(const Symbols *s, int name) {
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) return (ptrdiff_t)i;
    return -1;
}

static bool sym_has_ref(const Symbols *s, int name) {
    for (; s; s = s->parent)
        if (sym_find_own(s, name) >= 0) return true;
    return false;
}

static void sym_define(Parser *p, Symbols *s, int name, RefKind kind) {
    ptrdiff_t i = sym_find_own(s, name);
    if (i >= 0) {
        s->kinds[i] = (uint8_t)kind;
        return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        int *names = alloc_array(&p->c, cap, sizeof *names);
        uint8_t *kinds = alloc_array(&p->c, cap, sizeof *kinds);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(kinds, s->kinds, s->n * sizeof *kinds);
        }
        s->names = names;
        s->kinds = kinds;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->kinds[s->n++] = (uint8_t)kind;
}

static bool sym_stored(const Symbols *s, int name) {
    for (size_t i = 0; i < s->n_stores; i++)
        if (s->stores[i] == name) return true;
    return false;
}

static void sym_add_store(Parser *p, Symbols *s, int name) {
    if (sym_stored(s, name)) return;
    if (s->n_stores == s->cap_stores) {
        size_t cap = s->cap_stores ? s->cap_stores * 2 : 8;
        int *stores = alloc_array(&p->c, cap, sizeof *stores);
        if (s->n_stores) memcpy(stores, s->stores, s->n_stores * sizeof *stores);
        s->stores = stores;
        s->cap_stores = cap;
    }
    s->stores[s->n_stores++] = name;
}

static void sym_load(Parser *p, Symbols *s, int name) {
    if (!sym_has_ref(s, name)) sym_define(p, s, name, REF_RESOLVE);
}

static void sym_store(Parser *p, Symbols *s, int name) {
    sym_add_store(p, s, name);
    if (sym_find_own(s, name) >= 0) return;
    sym_define(p, s, name, s->parent && sym_has_ref(s->parent, name) ? REF_ALIAS : REF_UNDEFINED);
}

static void sym_param(Parser *p, Symbols *s, int name) {
    sym_add_store(p, s, name);
    sym_define(p, s, name, REF_PARAM);
}

static Symbols sym_copy(Parser *p, const Symbols *s) {
    Symbols c = *s;
    c.names = alloc_array(&p->c, s->cap ? s->cap : 1, sizeof *c.names);
    c.kinds = alloc_array(&p->c, s->cap ? s->cap : 1, sizeof *c.kinds);
    c.stores = alloc_array(&p->c, s->cap_stores ? s->cap_stores : 1, sizeof *c.stores);
    if (s->n) {
        memcpy(c.names, s->names, s->n * sizeof *c.names);
        memcpy(c.kinds, s->kinds, s->n * sizeof *c.kinds);
    }
    if (s->n_stores) memcpy(c.stores, s->stores, s->n_stores * sizeof *c.stores);
    return c;
}

/* After an if: the branches' names join the frame's; a name that only
 * some branches set starts as the outer one (or from the variables) rather
 * than undefined. */
static void sym_branch_update(Parser *p, Symbols *s, Symbols *branches, int n_branches) {
    for (int b = 0; b < n_branches; b++)
        for (size_t i = 0; i < branches[b].n; i++)
            sym_define(p, s, branches[b].names[i], (RefKind)branches[b].kinds[i]);
    for (int b = 0; b < n_branches; b++)
        for (size_t i = 0; i < branches[b].n_stores; i++) {
            int name = branches[b].stores[i];
            if (sym_stored(s, name)) continue;
            int count = 0;
            for (int k = 0; k < n_branches; k++) count += sym_stored(&branches[k], name);
            sym_add_store(p, s, name);
            if (count == n_branches) continue;
            sym_define(p, s, name, s->parent && sym_has_ref(s->parent, name) ? REF_ALIAS : REF_RESOLVE);
        }
}

static void sym_expr(Parser *p, Symbols *s, const Node *n) {
    if (!n) return;
    if (n->type == N_NAME) {
        sym_load(p, s, n->name);
        return;
    }
    sym_expr(p, s, n->a);
    sym_expr(p, s, n->b);
    sym_expr(p, s, n->c);
    sym_expr(p, s, n->d);
    for (size_t i = 0; i < n->list.n; i++) sym_expr(p, s, n->list.at[i]);
    for (size_t i = 0; i < n->kw.n; i++) sym_expr(p, s, n->kw.at[i]);
}

static void sym_target(Parser *p, Symbols *s, const Node *target, bool param) {
    if (target->type == N_NSREF) sym_load(p, s, target->name);
    else if (target->type == N_NAME) {
        if (param) sym_param(p, s, target->name);
        else sym_store(p, s, target->name);
    } else
        for (size_t i = 0; i < target->list.n; i++) sym_target(p, s, target->list.at[i], param);
}

static void sym_statements(Parser *p, Symbols *s, Nodes body);

static void sym_if(Parser *p, Symbols *s, const Node *n) {
    sym_expr(p, s, n->a);
    Symbols branches[3] = {sym_copy(p, s), sym_copy(p, s), sym_copy(p, s)};
    sym_statements(p, &branches[0], n->list);
    const Node *rest = n->b;
    for (; rest && rest->type == N_IF; rest = rest->b) {
        /* each elif is an if of its own, inside the elifs' branch */
        sym_expr(p, &branches[1], rest->a);
        Symbols inner[3] = {sym_copy(p, &branches[1]), sym_copy(p, &branches[1]), sym_copy(p, &branches[1])};
        sym_statements(p, &inner[0], rest->list);
        sym_branch_update(p, &branches[1], inner, 3);
    }
    if (rest) sym_statements(p, &branches[2], rest->list);
    sym_branch_update(p, s, branches, 3);
}

/* One statement of a frame: its own names (child frames only show the
 * expressions evaluated in this one). */
static void sym_statement(Parser *p, Symbols *s, const Node *n) {
    switch (n->type) {
    case N_PRINT:
        sym_expr(p, s, n->a);
        break;
    case N_IF:
        sym_if(p, s, n);
        break;
    case N_FOR:
        sym_expr(p, s, n->b);
        break;
    case N_SET:
        sym_expr(p, s, n->b);
        sym_target(p, s, n->a, false);
        break;
    case N_SETBLOCK:
        sym_target(p, s, n->a, false);
        break;
    case N_MACRO:
        sym_store(p, s, n->name);
        break;
    case N_WITH:
        for (size_t i = 0; i < n->kw.n; i++) sym_expr(p, s, n->kw.at[i]->b);
        break;
    case N_FILTERBLOCK:
        sym_expr(p, s, n->b);
        break;
    case N_BODY:
        sym_statements(p, s, n->list);
        break;
    default:
        break;
    }
}

static void sym_statements(Parser *p, Symbols *s, Nodes body) {
    for (size_t i = 0; i < body.n; i++) sym_statement(p, s, body.at[i]);
}

/* The names of s that start undefined, as an array for the frame's node. */
static const int *undefined_names(Parser *p, const Symbols *s, size_t *n) {
    int *names = alloc_array(&p->c, s->n ? s->n : 1, sizeof *names);
    *n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->kinds[i] == REF_UNDEFINED) names[(*n)++] = s->names[i];
    return names;
}

static void analyse_children(Parser *p, const Symbols *s, Nodes body);

/* Analyses one frame: its params, its body; records the names that start
 * undefined in *locals, then does the frames inside it. */
static void analyse_frame(Parser *p, const Symbols *parent, const Node *params, const Node *param_list, bool loop_frame,
                          Nodes body, const int **locals, size_t *n_locals) {
    Symbols s = {.parent = parent};
    if (params) sym_target(p, &s, params, true);
    for (size_t i = 0; param_list && i < param_list->kw.n; i++) {
        const Node *param = param_list->kw.at[i];
        if (param_list->type == N_MACRO) sym_param(p, &s, param->name);
        else sym_target(p, &s, param->a, true); /* N_WITH: its targets */
    }
    if (param_list && param_list->type == N_MACRO) {
        for (size_t i = 0; i < param_list->kw.n; i++) sym_expr(p, &s, param_list->kw.at[i]->a);
        if (param_list->op & MACRO_VARARGS) sym_param(p, &s, NAME_VARARGS);
        if (param_list->op & MACRO_KWARGS) sym_param(p, &s, NAME_KWARGS);
    }
    if (loop_frame) sym_param(p, &s, NAME_LOOP);
    sym_statements(p, &s, body);
    *locals = undefined_names(p, &s, n_locals);
    analyse_children(p, &s, body);
}

/* Finds the frames in a frame's statements (through its ifs) and analyses them. */
static void analyse_children(Parser *p, const Symbols *s, Nodes body) {
    for (size_t i = 0; i < body.n; i++) {
        Node *n = body.at[i];
        switch (n->type) {
        case N_IF:
            for (Node *branch = n; branch; branch = branch->b) analyse_children(p, s, branch->list);
            break;
        case N_BODY:
            analyse_children(p, s, n->list);
            break;
        case N_FOR:
            analyse_frame(p, s, n->a, NULL, true, n->list, &n->locals, &n->n_locals);
            if (n->d) analyse_frame(p, s, NULL, NULL, false, n->d->list, &n->d->locals, &n->d->n_locals);
            break;
        case N_MACRO:
        case N_WITH:
            analyse_frame(p, s, NULL, n, false, n->list, &n->locals, &n->n_locals);
            break;
        case N_SETBLOCK:
        case N_FILTERBLOCK:
            analyse_frame(p, s, NULL, NULL, false, n->list, &n->locals, &n->n_locals);
            break;
        default:
            break;
        }
    }
}

static bool is_end_name(const Token *t, const char *const *end_names) {
    if (!end_names || t->type != T_NAME) return false;
    for (const char *const *e = end_names; *e; e++)
        if (str_is(t->s, *e)) return true;
    return false;
}

/* Statements and text up to a {% tag %} named in end_names (NULL: up to
 * the end of the template), leaving that tag's name as the current token. */
static Nodes subparse(Parser *p, const char *const *end_names) {
    NodeList body = {0};
    for (;;) {
        Token *t = cur(p);
        if (t->type == T_EOF) break;
        if (t->type == T_DATA) {
            Node *n = new_node(p, N_TEXT, t->line);
            n->value = v_str(t->s.p, t->s.n);
            nodes_push(p, &body, n);
            advance(p);
        } else if (t->type == T_VAR_BEGIN) {
            advance(p);
            Node *n = new_node(p, N_PRINT, cur(p)->line);
            n->a = parse_tuple(p, false, true, NULL, false);
            n->line = n->a->line;
            n->a->print_root = true;
            nodes_push(p, &body, n);
            expect_type(p, T_VAR_END);
        } else if (t->type == T_BLOCK_BEGIN) {
            advance(p);
            if (is_end_name(cur(p), end_names)) return nodes_done(body);
            nodes_push(p, &body, parse_statement(p));
            expect_type(p, T_BLOCK_END);
        } else {
            parse_error(p, "unexpected '%s'", t->type == T_VAR_END ? "}}" : "%}");
        }
    }
    return nodes_done(body);
}

/* The body of a block statement: its tag ends, then statements up to one
 * of end_names (which is consumed when drop_needle). */
static Nodes parse_statements(Parser *p, const char *const *end_names, bool drop_needle) {
    skip_op(p, OP_COLON);
    expect_type(p, T_BLOCK_END);
    Nodes body = subparse(p, end_names);
    if (cur(p)->type == T_EOF) {
        char names[160] = "";
        for (const char *const *e = end_names; *e; e++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", e == end_names ? "" : " or ", *e);
        parse_error(p, "unexpected end of template: looking for %s", names);
    }
    if (drop_needle) advance(p);
    return body;
}

/* ======================================================================
 * The interpreter
 * ====================================================================== */

/* Variables: a scope per template, loop iteration, macro call and
 * with/set/filter block, each looking names up in its parent next. */
struct Scope {
    Scope *parent;
    size_t n, cap;
    int *names;
    Value *vals;
};

struct Render {
    Ctx c;
    const Template *t;
    Buf out;       /* the rendered text; captures (macros, set blocks) use its tail */
    int depth;     /* nesting of macro calls, blocks and expressions */
    struct tm now; /* for strftime_now */
    long microseconds;
    bool folding; /* evaluating a constant expression (eval_constant) */
};

typedef enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE } Flow;

static Scope *new_scope(Render *r, Scope *parent) {
    Scope *s = alloc(&r->c, sizeof *s);
    *s = (Scope){.parent = parent};
    return s;
}

static void scope_set(Render *r, Scope *s, int name, Value v) {
    for (size_t i = 0; i < s->n; i++)
        if (s->names[i] == name) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        int *names = alloc_array(&r->c, cap, sizeof *names);
        Value *vals = alloc_array(&r->c, cap, sizeof *vals);
        if (s->n) {
            memcpy(names, s->names, s->n * sizeof *names);
            memcpy(vals, s->vals, s->n * sizeof *vals);
        }
        s->names = names;
        s->vals = vals;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

/* A frame's names that start undefined (see analyse_frame). */
static void declare_locals(Render *r, Scope *s, const int *locals, size_t n) {
    for (size_t i = 0; i < n; i++) scope_set(r, s, locals[i], undefined_named(&r->c, r->t->names[locals[i]]));
}

static Scope *new_frame(Render *r, Scope *parent, const Node *n) {
    Scope *s = new_scope(r, parent);
    declare_locals(r, s, n->locals, n->n_locals);
    return s;
}

static Value lookup(Render *r, Scope *s, int name) {
    for (; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (s->names[i] == name) return s->vals[i];
    if (name >= NAME_RANGE && name <= NAME_STRFTIME_NOW) return (Value){.kind = V_FUNC, .func = name - NAME_RANGE};
    return undefined_named(&r->c, r->t->names[name]);
}

/* Scanning long text by character (to index a non-ASCII str) counts
 * towards the iteration budget, so that indexing in a loop stays bounded. */
static void count_scan(Render *r, size_t bytes) {
    r->c.iterations += bytes / SCAN_BYTES_PER_ITERATION;
    if (r->c.iterations > TEMPLATE_MAX_ITERATIONS) count_iteration(&r->c);
}

static void enter_depth(Render *r) {
    if (++r->depth > TEMPLATE_MAX_DEPTH)
        raise_error(&r->c, "the template nests deeper than %d levels (recursion?)", TEMPLATE_MAX_DEPTH);
}

/* Jinja's message for using an undefined value, raised. */
static noreturn void raise_undefined(Ctx *c, Value v) {
    const Undef *u = v.undef;
    if (u->hint) raise_error(c, "%s", u->hint);
    Buf name = {.c = c};
    write_value(NULL, &name, u->name, true, 0);
    if (u->obj.kind == V_MISSING) raise_error(c, "%.*s is undefined", (int)name.n, name.p);
    char obj[64];
    object_type_repr(obj, sizeof obj, u->obj);
    if (u->name.kind != V_STR) raise_error(c, "%s has no element %.*s", obj, (int)name.n, name.p);
    Buf quoted = {.c = c};
    repr_str(&quoted, str_c(obj));
    raise_error(c, "%.*s has no attribute %.*s", (int)quoted.n, quoted.p, (int)name.n, name.p);
}

static bool truthy(Value v) {
    switch (v.kind) {
    case V_UNDEFINED:
    case V_NONE:
        return false;
    case V_BOOL:
        return v.b;
    case V_INT:
        return v.i != 0;
    case V_FLOAT:
        return v.f != 0;
    case V_STR:
        return v.s.n > 0;
    case V_LIST:
        return v.list->len > 0;
    case V_DICT:
        return v.dict->len > 0;
    default:
        return true;
    }
}

/* Python's str(v). */
static Value to_str(Render *r, Value v) {
    if (v.kind == V_STR) return v;
    if (v.kind == V_UNDEFINED) return v_str("", 0);
    Buf b = {.c = &r->c};
    write_value(r, &b, v, false, 0);
    return buf_value(&b);
}

static Value markup(Value v) {
    v.markup = true;
    return v;
}

/* markupsafe's escape(): & < > " ' as HTML entities. */
static Value html_escape(Render *r, Value v) {
    if (v.kind == V_STR && v.markup) return v;
    Str s = to_str(r, v).s;
    Buf b = {.c = &r->c};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.p[i]) {
        case '&':
            buf_adds(&b, "&amp;");
            break;
        case '<':
            buf_adds(&b, "&lt;");
            break;
        case '>':
            buf_adds(&b, "&gt;");
            break;
        case '"':
            buf_adds(&b, "&#34;");
            break;
        case '\'':
            buf_adds(&b, "&#39;");
            break;
        default:
            buf_addc(&b, s.p[i]);
        }
    }
    return markup(buf_value(&b));
}

/* ---- sorting (stable, as Python's sorted) ---- */

typedef struct {
    Ctx *c;
    const Value *keys;
    bool reverse;
} SortBy;

static bool sort_before(const SortBy *by, size_t a, size_t b) {
    return by->reverse ? py_order(by->c, CMP_LT, by->keys[b], by->keys[a])
                       : py_order(by->c, CMP_LT, by->keys[a], by->keys[b]);
}

static void merge_sort(const SortBy *by, size_t *order, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t half = n / 2;
    merge_sort(by, order, tmp, half);
    merge_sort(by, order + half, tmp, n - half);
    size_t i = 0, j = half, k = 0;
    while (i < half && j < n) tmp[k++] = sort_before(by, order[j], order[i]) ? order[j++] : order[i++];
    while (i < half) tmp[k++] = order[i++];
    while (j < n) tmp[k++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
}

/* Sorts the indices order[0..n) by keys[order[i]]. */
static void sort_values(Ctx *c, Value *keys, size_t *order, size_t n, bool reverse) {
    for (size_t i = 0; i < n; i++) count_iteration(c);
    SortBy by = {c, keys, reverse};
    size_t *tmp = alloc_array(c, n, sizeof *tmp);
    merge_sort(&by, order, tmp, n);
}

/* ---- iterating ---- */

static List *generator_items(Render *r, Iter *it);

/* The characters of a str, each a str. */
static List *str_chars(Render *r, Value v) {
    size_t n = v.ascii ? v.s.n : count_chars(v.s.p, v.s.n);
    List *l = new_list(&r->c, SEQ_LIST, n);
    for (size_t i = 0, k = 0; k < n; k++) {
        size_t used = 1;
        if (!v.ascii) next_char(v.s.p + i, v.s.n - i, &used);
        l->items[k] = (Value){.kind = V_STR, .ascii = used == 1, .s = {v.s.p + i, used}};
        i += used;
    }
    return l;
}

/* What `for x in v` goes through, as an array (which the caller must not
 * change): a list's items, a dict's keys, a str's characters, nothing for
 * an undefined value, what is left of a generator. */
static Value *iterate(Render *r, Value v, size_t *n) {
    switch (v.kind) {
    case V_LIST:
        *n = v.list->len;
        return v.list->items;
    case V_DICT:
        *n = v.dict->len;
        return v.dict->keys;
    case V_STR: {
        List *l = str_chars(r, v);
        *n = l->len;
        return l->items;
    }
    case V_UNDEFINED:
        *n = 0;
        return NULL;
    case V_ITER: {
        List *l = generator_items(r, v.iter);
        *n = l->len - v.iter->pos;
        Value *items = *n ? l->items + v.iter->pos : NULL;
        v.iter->pos = l->len;
        return items;
    }
    default:
        raise_error(&r->c, "'%s' object is not iterable", type_name(v));
    }
}

/* A list of v's items (for filters that take any iterable). */
static List *to_list(Render *r, Value v) {
    if (v.kind == V_LIST && v.list->type == SEQ_LIST) return v.list;
    size_t n;
    Value *items = iterate(r, v, &n);
    List *l = new_list(&r->c, SEQ_LIST, n);
    if (n) memcpy(l->items, items, n * sizeof *items);
    return l;
}

static Value new_iter(Render *r, List *l, const char *type_name) {
    Iter *it = alloc(&r->c, sizeof *it);
    *it = (Iter){.list = l, .type_name = type_name};
    return (Value){.kind = V_ITER, .iter = it};
}

/* Python's len(v). */
static size_t length_of(Render *r, Value v) {
    switch (v.kind) {
    case V_STR:
        return v.ascii ? v.s.n : count_chars(v.s.p, v.s.n);
    case V_LIST:
        return v.list->len;
    case V_DICT:
        return v.dict->len;
    case V_UNDEFINED:
        return 0;
    case V_LOOP:
        return loop_length(r, v.loop);
    default:
        raise_error(&r->c, "object of type '%s' has no len()", type_name(v));
    }
}

/* ---- arithmetic ---- */

static const char *binop_symbol(OpId op) {
    switch (op) {
    case OP_ADD:
        return "+";
    case OP_SUB:
        return "-";
    case OP_MUL:
        return "*";
    case OP_DIV:
        return "/";
    case OP_FLOORDIV:
        return "//";
    case OP_MOD:
        return "%";
    default:
        return "** or pow()";
    }
}

static noreturn void raise_overflow(Render *r) {
    raise_error(&r->c, "integer overflow (integers are limited to 64 bits)");
}

/* Python's divmod for floats: floor division and modulo, with its signs. */
static void float_divmod(double x, double y, double *div, double *mod) {
    double m = fmod(x, y), d = (x - m) / y;
    if (m != 0) {
        if ((y < 0) != (m < 0)) {
            m += y;
            d -= 1.0;
        }
    } else m = copysign(0.0, y);
    if (d != 0) {
        double fd = floor(d);
        if (d - fd > 0.5) fd += 1.0;
        d = fd;
    } else d = copysign(0.0, x / y);
    *div = d;
    *mod = m;
}

static Value repeat_seq(Render *r, Value seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == V_STR) {
        if (times && seq.s.n > TEMPLATE_MAX_OUTPUT / (uint64_t)times)
            raise_error(&r->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
        Buf b = {.c = &r->c};
        for (int64_t i = 0; i < times; i++) buf_addstr(&b, seq.s);
        return buf_value(&b);
    }
    size_t n = seq.list->len;
    if (times && n > TEMPLATE_MAX_OUTPUT / (uint64_t)times) raise_error(&r->c, "a list would be too long");
    List *l = new_list(&r->c, seq.list->type == SEQ_TUPLE ? SEQ_TUPLE : SEQ_LIST, n * (size_t)times);
    for (int64_t i = 0; i < times; i++)
        if (n) memcpy(l->items + (size_t)i * n, seq.list->items, n * sizeof(Value));
    return v_list(l);
}

static Value format_percent(Render *r, Value fmt, Value args);

static Value arith_int(Render *r, OpId op, int64_t x, int64_t y) {
    int64_t z;
    switch (op) {
    case OP_ADD:
        if (__builtin_add_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_SUB:
        if (__builtin_sub_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_MUL:
        if (__builtin_mul_overflow(x, y, &z)) raise_overflow(r);
        return v_int(z);
    case OP_DIV:
        if (y == 0) raise_error(&r->c, "division by zero");
        return v_float((double)x / (double)y);
    case OP_FLOORDIV:
    case OP_MOD: {
        if (y == 0) raise_error(&r->c, op == OP_MOD ? "integer modulo by zero" : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
            if (op == OP_MOD) return v_int(0);
            raise_overflow(r);
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
            q--;
            m += y;
        }
        return v_int(op == OP_MOD ? m : q);
    }
    default: /* OP_POW */
        if (y < 0) {
            if (x == 0) raise_error(&r->c, "0.0 cannot be raised to a negative power");
            return v_float(pow((double)x, (double)y));
        }
        z = 1;
        while (y > 0) {
            if ((y & 1) && __builtin_mul_overflow(z, x, &z)) raise_overflow(r);
            y >>= 1;
            if (y > 0 && __builtin_mul_overflow(x, x, &x)) raise_overflow(r);
        }
        return v_int(z);
    }
}

static Value arith_float(Render *r, OpId op, double x, double y) {
    double d, m;
    switch (op) {
    case OP_ADD:
        return v_float(x + y);
    case OP_SUB:
        return v_float(x - y);
    case OP_MUL:
        return v_float(x * y);
    case OP_DIV:
        if (y == 0) raise_error(&r->c, "float division by zero");
        return v_float(x / y);
    case OP_FLOORDIV:
    case OP_MOD:
        if (y == 0) raise_error(&r->c, op == OP_MOD ? "float modulo" : "float floor division by zero");
        float_divmod(x, y, &d, &m);
        return v_float(op == OP_MOD ? m : d);
    default:
        if (x == 0 && y < 0) raise_error(&r->c, "0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y)) raise_error(&r->c, "complex numbers are not supported");
        d = pow(x, y);
        if (isinf(d) && isfinite(x) && isfinite(y)) raise_error(&r->c, "(34, 'Numerical result out of range')");
        return v_float(d);
    }
}

/* Python's a op b for + - * / // % ** (after Jinja's Undefined checks). */
static Value arith(Render *r, OpId op, Value a, Value b) {
    if (op == OP_MOD && is_str(a)) return format_percent(r, a, b);
    if (a.kind == V_UNDEFINED) raise_undefined(&r->c, a);
    if (b.kind == V_UNDEFINED) raise_undefined(&r->c, b);
    if (is_number(a) && is_number(b)) {
        if (is_integer(a) && is_integer(b)) return arith_int(r, op, int_of(a), int_of(b));
        return arith_float(r, op, float_of(a), float_of(b));
    }
    if (op == OP_ADD) {
        if (is_str(a) && is_str(b)) {
            /* Markup + str escapes the str (and str + Markup likewise). */
            if (a.markup != b.markup) {
                if (a.markup) b = html_escape(r, b);
                else a = html_escape(r, a);
            }
            /* a + b + c ...: each sum is the last allocation, so the next
             * one can extend it rather than copy it again */
            if (!a.markup && a.s.n + b.s.n <= TEMPLATE_MAX_OUTPUT &&
                grow_last(&r->c, a.s.p, a.s.n + 1, a.s.n + b.s.n + 1)) {
                char *p = (char *)a.s.p;
                memcpy(p + a.s.n, b.s.p, b.s.n);
                p[a.s.n + b.s.n] = '\0';
                return (Value){.kind = V_STR, .ascii = a.ascii && b.ascii, .s = {p, a.s.n + b.s.n}};
            }
            Buf buf = {.c = &r->c};
            buf_reserve(&buf, a.s.n + b.s.n);
            buf_addstr(&buf, a.s);
            buf_addstr(&buf, b.s);
            Value v = buf_value(&buf);
            v.markup = a.markup;
            return v;
        }
        if (a.kind == V_LIST && b.kind == V_LIST && a.list->type == b.list->type &&
            (a.list->type == SEQ_LIST || a.list->type == SEQ_TUPLE)) {
            List *l = new_list(&r->c, a.list->type, a.list->len + b.list->len);
            if (a.list->len) memcpy(l->items, a.list->items, a.list->len * sizeof(Value));
            if (b.list->len) memcpy(l->items + a.list->len, b.list->items, b.list->len * sizeof(Value));
            return v_list(l);
        }
        if (is_str(a) || is_seq(a, SEQ_LIST) || is_seq(a, SEQ_TUPLE))
            raise_error(&r->c, "can only concatenate %s (not \"%s\") to %s", type_name(a), type_name(b), type_name(a));
    }
    if (op == OP_MUL) {
        bool a_seq = is_str(a) || is_seq(a, SEQ_LIST) || is_seq(a, SEQ_TUPLE);
        bool b_seq = is_str(b) || is_seq(b, SEQ_LIST) || is_seq(b, SEQ_TUPLE);
        if (a_seq && is_integer(b)) return repeat_seq(r, a, int_of(b));
        if (b_seq && is_integer(a)) return repeat_seq(r, b, int_of(a));
        if (a_seq) raise_error(&r->c, "can't multiply sequence by non-int of type '%s'", type_name(b));
        if (b_seq) raise_error(&r->c, "can't multiply sequence by non-int of type '%s'", type_name(a));
    }
    raise_error(&r->c, "unsupported operand type(s) for %s: '%s' and '%s'", binop_symbol(op), type_name(a),
                type_name(b));
}

static Value negate(Render *r, Value v, bool minus) {
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_integer(v)) {
        if (!minus) return v_int(int_of(v));
        if (int_of(v) == INT64_MIN) raise_overflow(r);
        return v_int(-int_of(v));
    }
    if (v.kind == V_FLOAT) return v_float(minus ? -v.f : v.f);
    raise_error(&r->c, "bad operand type for unary %c: '%s'", minus ? '-' : '+', type_name(v));
}

/* Python's `item in container`. */
static bool contains(Render *r, Value container, Value item) {
    switch (container.kind) {
    case V_STR:
        if (!is_str(item)) raise_error(&r->c, "'in <string>' requires string as left operand, not %s", type_name(item));
        return item.s.n == 0 || memmem(container.s.p, container.s.n, item.s.p, item.s.n) != NULL;
    case V_LIST:
        for (size_t i = 0; i < container.list->len; i++)
            if (py_equal(&r->c, container.list->items[i], item)) return true;
        return false;
    case V_DICT:
        return dict_get(&r->c, container.dict, item) != NULL;
    case V_UNDEFINED:
        return false;
    case V_ITER: {
        Iter *it = container.iter;
        List *l = generator_items(r, it);
        while (it->pos < l->len)
            if (py_equal(&r->c, l->items[it->pos++], item)) return true;
        return false;
    }
    default:
        raise_error(&r->c, "argument of type '%s' is not iterable", type_name(container));
    }
}

static bool compare(Render *r, CmpOp op, Value a, Value b) {
    switch (op) {
    case CMP_EQ:
        return py_equal(&r->c, a, b);
    case CMP_NE:
        return !py_equal(&r->c, a, b);
    case CMP_IN:
        return contains(r, b, a);
    case CMP_NOTIN:
        return !contains(r, b, a);
    default:
        return py_order(&r->c, op, a, b);
    }
}

/* ---- for loops' state ---- */

static Value eval(Render *r, const Node *n, Scope *s);
static void assign(Render *r, const Node *target, Value v, Scope *s);

/* Makes the loop's items hold at least want items (or all there are),
 * running the loop's `if` filter ahead as far as needed. */
static void loop_fill(Render *r, Loop *l, size_t want) {
    const Node *filter = l->node->c;
    while (!l->all_known && l->items->len < want) {
        if (l->raw_pos == l->n_raw) {
            l->all_known = true;
            break;
        }
        Value item = l->raw[l->raw_pos++];
        count_iteration(&r->c);
        if (filter) {
            Scope *test = new_scope(r, l->scope);
            assign(r, l->node->a, item, test);
            if (!truthy(eval(r, filter, test))) continue;
        }
        list_push(&r->c, l->items, item);
    }
}

static size_t loop_length(Render *r, Loop *l) {
    loop_fill(r, l, SIZE_MAX);
    return l->items->len;
}

/* loop.index and the other attributes of jinja2's LoopContext. */
static bool loop_attribute(Render *r, Loop *l, Str name, Value *out) {
    size_t i = l->index0;
    if (str_is(name, "index")) *out = v_int((int64_t)i + 1);
    else if (str_is(name, "index0")) *out = v_int((int64_t)i);
    else if (str_is(name, "first")) *out = v_bool(i == 0);
    else if (str_is(name, "last")) {
        loop_fill(r, l, i + 2);
        *out = v_bool(i + 1 >= l->items->len);
    } else if (str_is(name, "length")) *out = v_int((int64_t)loop_length(r, l));
    else if (str_is(name, "revindex")) *out = v_int((int64_t)(loop_length(r, l) - i));
    else if (str_is(name, "revindex0")) *out = v_int((int64_t)(loop_length(r, l) - i) - 1);
    else if (str_is(name, "previtem"))
        *out = i > 0 ? l->items->items[i - 1] : undefined_hint(&r->c, "there is no previous item");
    else if (str_is(name, "nextitem")) {
        loop_fill(r, l, i + 2);
        *out = i + 1 < l->items->len ? l->items->items[i + 1] : undefined_hint(&r->c, "there is no next item");
    } else if (str_is(name, "depth")) *out = v_int(l->depth0 + 1);
    else if (str_is(name, "depth0")) *out = v_int(l->depth0);
    else return false;
    return true;
}

/* ---- attributes and items ---- */

static Value bound_method(Render *r, Value self, int id) {
    Method *m = alloc(&r->c, sizeof *m);
    *m = (Method){.self = self, .id = id};
    return (Value){.kind = V_METHOD, .method = m};
}

/* The ON_* bit of a value's type, for the methods table. */
static unsigned method_owner(Value v) {
    if (v.kind == V_STR) return ON_STR;
    if (v.kind == V_DICT) return ON_DICT;
    if (v.kind == V_LOOP) return ON_LOOP;
    if (v.kind == V_LIST) return v.list->type == SEQ_LIST ? ON_LIST : v.list->type == SEQ_TUPLE ? ON_TUPLE : 0;
    return 0;
}

/* obj's Python attribute `name` (a method), if it has one. */
static bool python_attribute(Render *r, Value obj, int method, Value *out) {
    unsigned owner = method_owner(obj);
    if (method < 0 || !(methods[method].on & owner)) return false;
    if (methods[method].unsafe & owner) {
        /* The immutable sandbox's answer: undefined, SecurityError when used. */
        char hint[128];
        snprintf(hint, sizeof hint, "access to attribute '%s' of '%s' object is unsafe.", methods[method].name,
                 type_name(obj));
        Value u = undefined_member(&r->c, obj, v_cstr(methods[method].name));
        u.undef->hint = new_str(&r->c, hint, strlen(hint)).s.p;
        u.undef->unsafe = true;
        *out = u;
        return true;
    }
    *out = bound_method(r, obj, method);
    return true;
}

/* obj.name as the sandbox does it: the Python attribute first, then
 * obj['name'], else undefined. method is name's MethodId or -1. */
static Value get_attr(Render *r, Value obj, Str name, int method) {
    Value out;
    switch (obj.kind) {
    case V_UNDEFINED:
        raise_undefined(&r->c, obj);
    case V_DICT: {
        if (python_attribute(r, obj, method, &out)) return out;
        Value *v = dict_get_str(&r->c, obj.dict, name);
        if (v) return *v;
        break;
    }
    case V_NAMESPACE: {
        Value *v = dict_get_str(&r->c, obj.dict, name);
        if (v) return *v;
        break;
    }
    case V_LOOP:
        if (loop_attribute(r, obj.loop, name, &out)) return out;
        if (python_attribute(r, obj, method, &out)) return out;
        break;
    default:
        if (python_attribute(r, obj, method, &out)) return out;
    }
    return undefined_member(&r->c, obj, v_str(name.p, name.n));
}

/* The byte offset of character index i (0 <= i <= length) of s. */
static size_t char_offset(Render *r, Value s, size_t i) {
    if (s.ascii) return i;
    size_t at = 0;
    for (size_t k = 0; k < i && at < s.s.n; k++) {
        at++;
        while (at < s.s.n && is_continuation((unsigned char)s.s.p[at])) at++;
    }
    count_scan(r, at);
    return at;
}

/* Python's index normalization for s[i]: -1 when out of range. */
static int64_t normalize_index(int64_t i, size_t len) {
    if (i < 0) i += (int64_t)len;
    return i < 0 || i >= (int64_t)len ? -1 : i;
}

/* obj[key] as the sandbox does it: the item first, then (for a str key)
 * the Python attribute, else undefined. */
static Value get_item(Render *r, Value obj, Value key) {
    switch (obj.kind) {
    case V_UNDEFINED:
        raise_undefined(&r->c, obj);
    case V_STR:
        if (is_integer(key)) {
            size_t len = length_of(r, obj);
            int64_t i = normalize_index(int_of(key), len);
            if (i >= 0) {
                size_t at = char_offset(r, obj, (size_t)i), used = 1;
                if (!obj.ascii) next_char(obj.s.p + at, obj.s.n - at, &used);
                return (Value){.kind = V_STR, .ascii = used == 1, .s = {obj.s.p + at, used}};
            }
        }
        break;
    case V_LIST:
        if (is_integer(key) && obj.list->type <= SEQ_RANGE) {
            int64_t i = normalize_index(int_of(key), obj.list->len);
            if (i >= 0) return obj.list->items[i];
        }
        break;
    case V_DICT:
        if (key.kind != V_LIST && key.kind != V_DICT) {
            Value *v = dict_get(&r->c, obj.dict, key);
            if (v) return *v;
        }
        break;
    default:
        break;
    }
    if (key.kind == V_STR) return get_attr(r, obj, key.s, find_method(key.s));
    return undefined_member(&r->c, obj, key);
}

/* Python's slice arithmetic: the start, step and count of s[start:stop:step]. */
static bool slice_indices(Render *r, Value start, Value stop, Value step, size_t len, int64_t *first, int64_t *by,
                          size_t *count, int64_t *last) {
    int64_t st = 1;
    if (step.kind != V_NONE && step.kind != V_MISSING) {
        if (!is_integer(step)) return false;
        st = int_of(step);
        if (st == 0) raise_error(&r->c, "slice step cannot be zero");
        if (st < -INT64_MAX) st = -INT64_MAX;
    }
    int64_t n = (int64_t)len, lo, hi;
    Value ends[2] = {start, stop};
    int64_t idx[2];
    for (int k = 0; k < 2; k++) {
        Value e = ends[k];
        if (e.kind == V_NONE || e.kind == V_MISSING) {
            idx[k] = st > 0 ? (k == 0 ? 0 : n) : (k == 0 ? n - 1 : -1);
            continue;
        }
        if (!is_integer(e)) return false;
        int64_t i = int_of(e);
        if (i < 0) {
            i = i < -n ? (st < 0 ? -1 : 0) : i + n;
        } else if (i >= n) i = st < 0 ? n - 1 : n;
        idx[k] = i;
    }
    lo = idx[0];
    hi = idx[1];
    int64_t c = 0;
    if (st > 0 && hi > lo) c = (hi - lo - 1) / st + 1;
    if (st < 0 && lo > hi) c = (lo - hi - 1) / (-st) + 1;
    *first = lo;
    *by = st;
    *count = (size_t)c;
    *last = hi;
    return true;
}

/* obj[start:stop:step]. jinja2 compiles slices to Python's own
 * subscript, so unlike items a failed slice raises. */
static Value get_slice(Render *r, Value obj, Value start, Value stop, Value step, bool constant) {
    if (obj.kind == V_UNDEFINED) raise_undefined(&r->c, obj);
    int64_t first, by, last;
    size_t count;
    if (obj.kind == V_STR) {
        size_t len = length_of(r, obj);
        if (!slice_indices(r, start, stop, step, len, &first, &by, &count, &last)) goto bad_index;
        if (by == 1) {
            size_t a = char_offset(r, obj, (size_t)first), b = char_offset(r, obj, (size_t)first + count);
            return new_str(&r->c, obj.s.p + a, b - a);
        }
        List *chars = str_chars(r, obj);
        Buf b = {.c = &r->c};
        for (size_t k = 0; k < count; k++) buf_addstr(&b, chars->items[first + (int64_t)k * by].s);
        return buf_value(&b);
    }
    if (obj.kind == V_LIST && obj.list->type <= SEQ_RANGE) {
        if (!slice_indices(r, start, stop, step, obj.list->len, &first, &by, &count, &last)) goto bad_index;
        List *l = new_list(&r->c, obj.list->type, count);
        for (size_t k = 0; k < count; k++) l->items[k] = obj.list->items[first + (int64_t)k * by];
        if (l->type == SEQ_RANGE) {
            /* a range's slice is a range: range(a, b, s)[i:j:k] is range(a + i*s, a + j*s, s*k) */
            int64_t a = obj.list->range[0], s = obj.list->range[2];
            l->range[0] = a + first * s;
            l->range[1] = a + last * s;
            l->range[2] = s * by;
        }
        return v_list(l);
    }
    if (constant) goto undefined;
    if (obj.kind == V_DICT) raise_error(&r->c, "unhashable type: 'slice'");
    raise_error(&r->c, "'%s' object is not subscriptable", type_name(obj));
bad_index:
    if (constant) goto undefined;
    raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
undefined:;
    List *parts = new_list(&r->c, SEQ_TUPLE, 3);
    Value ends[3] = {start, stop, step};
    for (int i = 0; i < 3; i++) parts->items[i] = given(ends[i]) ? ends[i] : v_none();
    return undefined_member(&r->c, obj, v_list(parts));
}

/* ---- arguments of calls ---- */

typedef struct {
    Value *pos;
    size_t n_pos;
    const int *kw_names; /* interned names */
    Value *kw;
    size_t n_kw;
} Args;

/* Lays the arguments out in the order of params (a NULL-terminated list
 * of names), V_MISSING where not given, raising Python's TypeErrors. */
static void bind_args(Render *r, const char *fn, const Args *a, const char *const *params, Value *out) {
    size_t n_params = 0;
    while (params[n_params]) n_params++;
    if (a->n_pos > n_params)
        raise_error(&r->c, "%s() takes at most %zu argument%s (%zu given)", fn, n_params, n_params == 1 ? "" : "s",
                    a->n_pos);
    for (size_t i = 0; i < n_params; i++) out[i] = i < a->n_pos ? a->pos[i] : v_missing();
    for (size_t k = 0; k < a->n_kw; k++) {
        Str name = r->t->names[a->kw_names[k]];
        size_t i = 0;
        while (i < n_params && !str_is(name, params[i])) i++;
        if (i == n_params)
            raise_error(&r->c, "%s() got an unexpected keyword argument '%.*s'", fn, (int)name.n, name.p);
        if (out[i].kind != V_MISSING)
            raise_error(&r->c, "%s() got multiple values for argument '%.*s'", fn, (int)name.n, name.p);
        out[i] = a->kw[k];
    }
}

/* For a built-in method that takes up to max positional arguments only:
 * Python's TypeErrors. */
static void positional_only(Render *r, const char *fn, const Args *a, size_t max) {
    if (a->n_kw) raise_error(&r->c, "%s() takes no keyword arguments", fn);
    if (a->n_pos > max)
        raise_error(&r->c, "%s expected at most %zu argument%s, got %zu", fn, max, max == 1 ? "" : "s", a->n_pos);
}

/* For a method that takes no arguments: Python's TypeError if given some. */
static void no_arguments(Render *r, Value self, const char *fn, const Args *a) {
    if (a->n_kw) raise_error(&r->c, "%s.%s() takes no keyword arguments", type_name(self), fn);
    if (a->n_pos) raise_error(&r->c, "%s.%s() takes no arguments (%zu given)", type_name(self), fn, a->n_pos);
}

/* A str argument; what names the argument in Python's TypeError ("must
 * be str, not int"), e.g. "replace() argument 1 ". */
static Str arg_str(Render *r, const char *what, Value v) {
    if (!is_str(v)) raise_error(&r->c, "%smust be str, not %s", what, type_name(v));
    return v.s;
}

static int64_t arg_int(Render *r, const char *fn, Value v) {
    if (!is_integer(v)) raise_error(&r->c, "%s(): '%s' object cannot be interpreted as an integer", fn, type_name(v));
    return int_of(v);
}

/* ---- str methods ---- */

typedef enum { CASE_UPPER, CASE_LOWER, CASE_SWAP, CASE_TITLE, CASE_CAPITALIZE } CaseMap;

static void add_upper(Buf *b, uint32_t c) {
    if (c == 0xDF) buf_adds(b, "SS");
    else buf_addchar(b, char_upper(c));
}

static Value change_case(Render *r, Value v, CaseMap how) {
    Str s = v.s;
    Buf b = {.c = &r->c};
    buf_reserve(&b, s.n);
    bool prev_cased = false;
    for (size_t i = 0, k = 0; i < s.n; k++) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        bool upper = false;
        switch (how) {
        case CASE_UPPER:
            upper = true;
            break;
        case CASE_LOWER:
            break;
        case CASE_SWAP:
            upper = !char_is_upper(c);
            break;
        case CASE_TITLE:
            upper = !prev_cased;
            break;
        case CASE_CAPITALIZE:
            upper = k == 0;
            break;
        }
        if (how == CASE_SWAP && !char_is_upper(c) && !char_is_lower(c)) buf_add(&b, s.p + i, used);
        else if (upper) add_upper(&b, c);
        else buf_addchar(&b, char_lower(c));
        prev_cased = char_is_cased(c);
        i += used;
    }
    return buf_value(&b);
}

static bool in_chars(uint32_t c, Str chars) {
    for (size_t i = 0; i < chars.n;) {
        size_t used;
        if (next_char(chars.p + i, chars.n - i, &used) == c) return true;
        i += used;
    }
    return false;
}

/* Python's strip/lstrip/rstrip: white space, or the characters of chars. */
static Value strip(Render *r, Value v, Value chars, bool left, bool right) {
    if (given(chars) && chars.kind != V_NONE && !is_str(chars))
        raise_error(&r->c, "%s arg must be None or str", left && right ? "strip" : left ? "lstrip" : "rstrip");
    bool space = !given(chars) || chars.kind == V_NONE;
    Str s = v.s;
    size_t a = 0, b = s.n, used;
    while (left && a < b) {
        uint32_t c = next_char(s.p + a, b - a, &used);
        if (space ? !py_isspace(c) : !in_chars(c, chars.s)) break;
        a += used;
    }
    while (right && b > a) {
        size_t start = prev_char_start(s.p + a, b - a) + a;
        uint32_t c = next_char(s.p + start, b - start, &used);
        if (space ? !py_isspace(c) : !in_chars(c, chars.s)) break;
        b = start;
    }
    if (a == 0 && b == s.n) return v;
    return (Value){.kind = V_STR, .ascii = v.ascii, .s = {s.p + a, b - a}};
}

static Value substr(Value v, size_t a, size_t b) { return v_str(v.s.p + a, b - a); }

/* Python's str.split (right: rsplit) with sep None (runs of white space)
 * or a separator, at most maxsplit times (-1: no limit). */
static Value split(Render *r, Value v, Value sep, int64_t maxsplit, bool right) {
    List *l = new_list(&r->c, SEQ_LIST, 0);
    Str s = v.s;
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (!given(sep) || sep.kind == V_NONE) {
        size_t used;
        if (!right) {
            size_t i = 0;
            for (;;) {
                while (i < s.n && py_isspace(next_char(s.p + i, s.n - i, &used))) i += used;
                if (i == s.n) break;
                if (maxsplit-- == 0) {
                    list_push(&r->c, l, substr(v, i, s.n));
                    break;
                }
                size_t j = i;
                while (j < s.n && !py_isspace(next_char(s.p + j, s.n - j, &used))) j += used;
                list_push(&r->c, l, substr(v, i, j));
                i = j;
            }
            return v_list(l);
        }
        size_t j = s.n;
        for (;;) {
            while (j > 0) {
                size_t start = prev_char_start(s.p, j);
                if (!py_isspace(next_char(s.p + start, j - start, &used))) break;
                j = start;
            }
            if (j == 0) break;
            if (maxsplit-- == 0) {
                list_push(&r->c, l, substr(v, 0, j));
                break;
            }
            size_t i = j;
            while (i > 0) {
                size_t start = prev_char_start(s.p, i);
                if (py_isspace(next_char(s.p + start, i - start, &used))) break;
                i = start;
            }
            list_push(&r->c, l, substr(v, i, j));
            j = i;
        }
    } else {
        if (!is_str(sep)) raise_error(&r->c, "must be str or None, not %s", type_name(sep));
        Str d = sep.s;
        if (d.n == 0) raise_error(&r->c, "empty separator");
        if (!right) {
            size_t i = 0;
            const char *hit;
            while (maxsplit-- > 0 && (hit = memmem(s.p + i, s.n - i, d.p, d.n)) != NULL) {
                list_push(&r->c, l, substr(v, i, (size_t)(hit - s.p)));
                i = (size_t)(hit - s.p) + d.n;
            }
            list_push(&r->c, l, substr(v, i, s.n));
            return v_list(l);
        }
        size_t j = s.n;
        while (maxsplit > 0 && j >= d.n) {
            size_t k = j - d.n;
            for (;; k--) {
                if (memcmp(s.p + k, d.p, d.n) == 0) break;
                if (k == 0) {
                    k = SIZE_MAX;
                    break;
                }
            }
            if (k == SIZE_MAX) break;
            list_push(&r->c, l, substr(v, k + d.n, j));
            j = k;
            maxsplit--;
        }
        list_push(&r->c, l, substr(v, 0, j));
    }
    /* rsplit found the pieces from the right */
    for (size_t i = 0; i < l->len / 2; i++) {
        Value t = l->items[i];
        l->items[i] = l->items[l->len - 1 - i];
        l->items[l->len - 1 - i] = t;
    }
    return v_list(l);
}

/* Python's line boundaries for splitlines(): the length of the one at s[i], or 0. */
static size_t line_break_at(Str s, size_t i) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch == '\r') return i + 1 < s.n && s.p[i + 1] == '\n' ? 2 : 1;
    if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1C && ch <= 0x1E)) return 1;
    if (ch >= 0x80) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        if (c == 0x85 || c == 0x2028 || c == 0x2029) return used;
    }
    return 0;
}

static Value splitlines(Render *r, Value v, bool keepends) {
    List *l = new_list(&r->c, SEQ_LIST, 0);
    Str s = v.s;
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        size_t br = line_break_at(s, i);
        if (!br) {
            i++;
            continue;
        }
        list_push(&r->c, l, substr(v, start, keepends ? i + br : i));
        i += br;
        start = i;
    }
    if (start < s.n) list_push(&r->c, l, substr(v, start, s.n));
    return v_list(l);
}

/* The character range [start, end) of a str method's optional start and
 * end arguments, as byte offsets. */
static void method_range(Render *r, Value v, Value start, Value end, size_t *a, size_t *b) {
    size_t len = length_of(r, v);
    int64_t lo = 0, hi = (int64_t)len;
    if (given(start) && start.kind != V_NONE) {
        if (!is_integer(start))
            raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
        lo = int_of(start);
        if (lo < 0) lo = lo + (int64_t)len < 0 ? 0 : lo + (int64_t)len;
    }
    if (given(end) && end.kind != V_NONE) {
        if (!is_integer(end)) raise_error(&r->c, "slice indices must be integers or None or have an __index__ method");
        hi = int_of(end);
        if (hi < 0) hi = hi + (int64_t)len < 0 ? 0 : hi + (int64_t)len;
    }
    if (lo > (int64_t)len) lo = (int64_t)len + 1; /* an empty range that finds nothing, not even "" */
    if (hi > (int64_t)len) hi = (int64_t)len;
    if (lo > (int64_t)len) {
        *a = v.s.n + 1;
        *b = v.s.n;
        return;
    }
    *a = char_offset(r, v, (size_t)lo);
    *b = hi < lo ? *a : char_offset(r, v, (size_t)hi);
}

/* str.find/rfind/index/rindex/count. */
static Value find_sub(Render *r, Value v, MethodId id, Value *arg) {
    size_t a, b;
    method_range(r, v, arg[1], arg[2], &a, &b);
    Str sub = arg_str(r, "", arg[0]);
    if (a > b) {
        if (id == M_COUNT) return v_int(0);
        if (id == M_INDEX || id == M_RINDEX) raise_error(&r->c, "substring not found");
        return v_int(-1);
    }
    Str s = {v.s.p + a, b - a};
    if (id == M_COUNT) {
        if (sub.n == 0) return v_int((int64_t)count_chars(s.p, s.n) + 1);
        int64_t count = 0;
        const char *hit;
        for (size_t i = 0; (hit = memmem(s.p + i, s.n - i, sub.p, sub.n)) != NULL; i = (size_t)(hit - s.p) + sub.n)
            count++;
        return v_int(count);
    }
    const char *hit = NULL;
    if (id == M_FIND || id == M_INDEX) hit = sub.n == 0 ? s.p : memmem(s.p, s.n, sub.p, sub.n);
    else if (sub.n <= s.n)
        for (size_t k = s.n - sub.n + 1; k-- > 0;)
            if (memcmp(s.p + k, sub.p, sub.n) == 0) {
                hit = s.p + k;
                break;
            }
    if (!hit) {
        if (id == M_INDEX || id == M_RINDEX) raise_error(&r->c, "substring not found");
        return v_int(-1);
    }
    return v_int((int64_t)count_chars(v.s.p, (size_t)(hit - v.s.p)));
}

/* str.startswith/endswith with a str or a tuple of str. */
static Value starts_or_ends(Render *r, Value v, bool ends, Value *arg) {
    size_t a, b;
    method_range(r, v, arg[1], arg[2], &a, &b);
    Value want = arg[0];
    size_t n = 1;
    Value *options = &want;
    if (is_seq(want, SEQ_TUPLE)) {
        n = want.list->len;
        options = want.list->items;
    } else if (!is_str(want))
        raise_error(&r->c, "%s first arg must be str or a tuple of str, not %s", ends ? "endswith" : "startswith",
                    type_name(want));
    for (size_t i = 0; i < n; i++) {
        if (!is_str(options[i]))
            raise_error(&r->c, "tuple for %s must only contain str, not %s", ends ? "endswith" : "startswith",
                        type_name(options[i]));
        Str o = options[i].s;
        if (a > b || o.n > b - a) continue;
        if (memcmp(v.s.p + (ends ? b - o.n : a), o.p, o.n) == 0) return v_bool(true);
    }
    return v_bool(false);
}

/* str.center/ljust/rjust: pads to width characters with fill. */
static Value pad(Render *r, Value v, int64_t width, Value fill, int where) {
    uint32_t f = ' ';
    if (given(fill)) {
        if (!is_str(fill) || count_chars(fill.s.p, fill.s.n) != 1)
            raise_error(&r->c, "The fill character must be exactly one character long");
        size_t used;
        f = next_char(fill.s.p, fill.s.n, &used);
    }
    size_t len = length_of(r, v);
    if (width <= (int64_t)len) return v;
    if (width > (int64_t)TEMPLATE_MAX_OUTPUT)
        raise_error(&r->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    size_t margin = (size_t)width - len, left = where < 0   ? 0
                                                : where > 0 ? margin
                                                            : margin / 2 + (margin & (size_t)width & 1);
    Buf b = {.c = &r->c};
    for (size_t i = 0; i < left; i++) buf_addchar(&b, f);
    buf_addstr(&b, v.s);
    for (size_t i = left; i < margin; i++) buf_addchar(&b, f);
    return buf_value(&b);
}

/* Python's str.replace (count < 0: all). */
static Value replace(Render *r, Value v, Str old, Str new, int64_t count) {
    if (count < 0) count = INT64_MAX;
    Buf b = {.c = &r->c};
    Str s = v.s;
    if (old.n == 0) {
        /* "" matches before every character and at the end */
        size_t i = 0;
        while (i < s.n && count > 0) {
            buf_addstr(&b, new);
            size_t used = 1;
            if (!v.ascii) next_char(s.p + i, s.n - i, &used);
            buf_add(&b, s.p + i, used);
            i += used;
            count--;
        }
        if (i == s.n && count > 0) buf_addstr(&b, new);
        buf_add(&b, s.p + i, s.n - i);
        return buf_value(&b);
    }
    size_t i = 0;
    const char *hit;
    while (count-- > 0 && (hit = memmem(s.p + i, s.n - i, old.p, old.n)) != NULL) {
        buf_add(&b, s.p + i, (size_t)(hit - s.p) - i);
        buf_addstr(&b, new);
        i = (size_t)(hit - s.p) + old.n;
    }
    if (i == 0) return v;
    buf_add(&b, s.p + i, s.n - i);
    return buf_value(&b);
}

/* The str predicates isalpha, isdigit, ...: true for a non-empty str whose
 * every character passes. */
static Value str_predicate(Value v, MethodId id) {
    Str s = v.s;
    if (s.n == 0) return v_bool(false);
    bool any_cased = false, prev_cased = false, title_ok = true;
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        unsigned cls = unicode_class(c);
        bool ok = true;
        switch (id) {
        case M_ISALNUM:
            ok = (cls & (UNICODE_LETTER | UNICODE_NUMBER)) != 0;
            break;
        case M_ISALPHA:
            ok = (cls & UNICODE_LETTER) != 0;
            break;
        case M_ISDECIMAL:
        case M_ISDIGIT:
        case M_ISNUMERIC:
            ok = (cls & UNICODE_NUMBER) != 0;
            break;
        case M_ISSPACE:
            ok = py_isspace(c);
            break;
        case M_ISLOWER:
            ok = !char_is_upper(c);
            break;
        case M_ISUPPER:
            ok = !char_is_lower(c);
            break;
        default: /* M_ISTITLE */
            if (char_is_upper(c)) title_ok &= !prev_cased;
            else if (char_is_lower(c)) title_ok &= prev_cased;
            break;
        }
        if (!ok) return v_bool(false);
        bool cased = char_is_upper(c) || char_is_lower(c);
        any_cased |= cased;
        prev_cased = cased;
        i += used;
    }
    if (id == M_ISLOWER || id == M_ISUPPER) return v_bool(any_cased);
    if (id == M_ISTITLE) return v_bool(any_cased && title_ok);
    return v_bool(true);
}

static Value join(Render *r, Str sep, Value iterable, bool any_type) {
    size_t n;
    if (!any_type && iterable.kind != V_STR && iterable.kind != V_LIST && iterable.kind != V_DICT &&
        iterable.kind != V_ITER && iterable.kind != V_UNDEFINED)
        raise_error(&r->c, "can only join an iterable");
    Value *items = iterate(r, iterable, &n);
    Buf b = {.c = &r->c};
    for (size_t i = 0; i < n; i++) {
        if (i) buf_addstr(&b, sep);
        if (!any_type && !is_str(items[i]))
            raise_error(&r->c, "sequence item %zu: expected str instance, %s found", i, type_name(items[i]));
        buf_addstr(&b, to_str(r, items[i]).s);
    }
    return buf_value(&b);
}

static Value str_format(Render *r, Value fmt, const Args *a);

static Value str_method(Render *r, Value v, MethodId id, const Args *a) {
    static const char *const one[] = {"x", NULL};
    static const char *const two[] = {"x", "y", NULL};
    static const char *const sub_range[] = {"sub", "start", "end", NULL};
    static const char *const split_params[] = {"sep", "maxsplit", NULL};
    static const char *const keepends[] = {"keepends", NULL};
    static const char *const replace_params[] = {"old", "new", "count", NULL};
    const char *fn = methods[id].name;
    Value arg[3];
    switch (id) {
    case M_FORMAT:
        return str_format(r, v, a);
    case M_SPLIT:
    case M_RSPLIT:
        bind_args(r, fn, a, split_params, arg);
        return split(r, v, arg[0], given(arg[1]) ? arg_int(r, fn, arg[1]) : -1, id == M_RSPLIT);
    case M_SPLITLINES:
        bind_args(r, fn, a, keepends, arg);
        return splitlines(r, v, given(arg[0]) && truthy(arg[0]));
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        positional_only(r, fn, a, 1);
        bind_args(r, fn, a, one, arg);
        return strip(r, v, arg[0], id != M_RSTRIP, id != M_LSTRIP);
    case M_STARTSWITH:
    case M_ENDSWITH:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, sub_range, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        return starts_or_ends(r, v, id == M_ENDSWITH, arg);
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, sub_range, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        return find_sub(r, v, id, arg);
    case M_REPLACE:
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, replace_params, arg);
        if (!given(arg[1])) raise_error(&r->c, "replace expected at least 2 arguments, got %zu", a->n_pos);
        {
            Str old = arg_str(r, "replace() argument 1 ", arg[0]), new = arg_str(r, "replace() argument 2 ", arg[1]);
            return replace(r, v, old, new, given(arg[2]) ? arg_int(r, fn, arg[2]) : -1);
        }
    case M_JOIN:
        if (a->n_kw) raise_error(&r->c, "str.join() takes no keyword arguments");
        if (a->n_pos != 1) raise_error(&r->c, "str.join() takes exactly one argument (%zu given)", a->n_pos);
        bind_args(r, fn, a, one, arg);
        return join(r, v.s, arg[0], false);
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
        positional_only(r, fn, a, 2);
        bind_args(r, fn, a, two, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s expected at least 1 argument, got 0", fn);
        return pad(r, v, arg_int(r, fn, arg[0]), arg[1], id == M_LJUST ? -1 : id == M_RJUST ? 1 : 0);
    case M_ZFILL: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "zfill() takes exactly one argument (0 given)");
        int64_t width = arg_int(r, fn, arg[0]);
        size_t len = length_of(r, v);
        if (width <= (int64_t)len) return v;
        Value padded = pad(r, v, width, v_str("0", 1), 1);
        if (v.s.n && (v.s.p[0] == '+' || v.s.p[0] == '-')) {
            /* the sign goes first: "-42" -> "-0042" */
            char *p = (char *)padded.s.p;
            p[(size_t)width - len] = '0';
            p[0] = v.s.p[0];
        }
        return padded;
    }
    case M_PARTITION:
    case M_RPARTITION: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes exactly one argument (0 given)", fn);
        Str sep = arg_str(r, "", arg[0]);
        if (sep.n == 0) raise_error(&r->c, "empty separator");
        const char *hit = NULL;
        if (id == M_PARTITION) hit = memmem(v.s.p, v.s.n, sep.p, sep.n);
        else if (sep.n <= v.s.n)
            for (size_t k = v.s.n - sep.n + 1; k-- > 0;)
                if (memcmp(v.s.p + k, sep.p, sep.n) == 0) {
                    hit = v.s.p + k;
                    break;
                }
        List *l = new_list(&r->c, SEQ_TUPLE, 3);
        Value empty = v_str("", 0);
        if (!hit) {
            l->items[0] = id == M_PARTITION ? v : empty;
            l->items[1] = empty;
            l->items[2] = id == M_PARTITION ? empty : v;
        } else {
            size_t at = (size_t)(hit - v.s.p);
            l->items[0] = substr(v, 0, at);
            l->items[1] = arg[0];
            l->items[2] = substr(v, at + sep.n, v.s.n);
        }
        return v_list(l);
    }
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        bind_args(r, fn, a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes exactly one argument (0 given)", fn);
        char what[40];
        snprintf(what, sizeof what, "%s() argument ", fn);
        Str x = arg_str(r, what, arg[0]);
        if (x.n > v.s.n) return v;
        if (id == M_REMOVEPREFIX && memcmp(v.s.p, x.p, x.n) == 0) return substr(v, x.n, v.s.n);
        if (id == M_REMOVESUFFIX && x.n && memcmp(v.s.p + v.s.n - x.n, x.p, x.n) == 0) return substr(v, 0, v.s.n - x.n);
        return v;
    }
    default:
        break;
    }
    no_arguments(r, v, fn, a);
    switch (id) {
    case M_UPPER:
        return change_case(r, v, CASE_UPPER);
    case M_LOWER:
    case M_CASEFOLD:
        return change_case(r, v, CASE_LOWER);
    case M_SWAPCASE:
        return change_case(r, v, CASE_SWAP);
    case M_TITLE:
        return change_case(r, v, CASE_TITLE);
    case M_CAPITALIZE:
        return change_case(r, v, CASE_CAPITALIZE);
    default:
        return str_predicate(v, id);
    }
}

/* ---- dict, list and loop methods ---- */

static Value dict_view(Render *r, Dict *d, SeqType type) {
    List *l = new_list(&r->c, type, d->len);
    for (size_t i = 0; i < d->len; i++)
        l->items[i] = type == SEQ_KEYS     ? d->keys[i]
                      : type == SEQ_VALUES ? d->vals[i]
                                           : new_tuple2(&r->c, d->keys[i], d->vals[i]);
    return v_list(l);
}

static Value copy_dict(Render *r, const Dict *d) {
    Dict *copy = new_dict(&r->c, d->len);
    for (size_t i = 0; i < d->len; i++) dict_set(&r->c, copy, d->keys[i], d->vals[i]);
    return v_dict(copy);
}

static Value other_method(Render *r, Value v, MethodId id, const Args *a) {
    static const char *const get_params[] = {"key", "default", NULL};
    static const char *const index_params[] = {"value", "start", "stop", NULL};
    static const char *const pop_params[] = {"index", NULL};
    const char *fn = methods[id].name;
    Value arg[3];
    switch (id) {
    case M_GET: {
        positional_only(r, fn, a, 2);
        bind_args(r, fn, a, get_params, arg);
        if (!given(arg[0])) raise_error(&r->c, "get expected at least 1 argument, got 0");
        Value *found = dict_get(&r->c, v.dict, arg[0]);
        return found ? *found : given(arg[1]) ? arg[1] : v_none();
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES:
        no_arguments(r, v, fn, a);
        return dict_view(r, v.dict, id == M_ITEMS ? SEQ_ITEMS : id == M_KEYS ? SEQ_KEYS : SEQ_VALUES);
    case M_COPY: {
        no_arguments(r, v, fn, a);
        if (v.kind == V_DICT) return copy_dict(r, v.dict);
        List *copy = new_list(&r->c, SEQ_LIST, v.list->len);
        if (v.list->len) memcpy(copy->items, v.list->items, v.list->len * sizeof(Value));
        return v_list(copy);
    }
    case M_INDEX:
    case M_COUNT: {
        if (id == M_COUNT && (a->n_kw || a->n_pos != 1))
            raise_error(&r->c, "%s.count() takes exactly one argument (%zu given)", type_name(v), a->n_pos + a->n_kw);
        positional_only(r, fn, a, 3);
        bind_args(r, fn, a, index_params, arg);
        if (!given(arg[0])) raise_error(&r->c, "%s() takes at least 1 argument (0 given)", fn);
        int64_t count = 0;
        for (size_t i = 0; i < v.list->len; i++)
            if (py_equal(&r->c, v.list->items[i], arg[0])) {
                if (id == M_INDEX) return v_int((int64_t)i);
                count++;
            }
        if (id == M_COUNT) return v_int(count);
        Buf b = {.c = &r->c};
        write_value(r, &b, arg[0], true, 0);
        raise_error(&r->c, "%.*s is not in %s", (int)b.n, b.p, type_name(v));
    }
    case M_POP: {
        /* list.pop is allowed by the immutable sandbox, and changes the list */
        positional_only(r, fn, a, 1);
        bind_args(r, fn, a, pop_params, arg);
        List *l = v.list;
        if (l->len == 0) raise_error(&r->c, "pop from empty list");
        int64_t i = given(arg[0]) ? normalize_index(arg_int(r, fn, arg[0]), l->len) : (int64_t)l->len - 1;
        if (i < 0) raise_error(&r->c, "pop index out of range");
        Value item = l->items[i];
        memmove(l->items + i, l->items + i + 1, (l->len - (size_t)i - 1) * sizeof(Value));
        l->len--;
        return item;
    }
    case M_CLEAR:
        no_arguments(r, v, fn, a);
        v.list->len = 0;
        return v_none();
    case M_CYCLE:
        if (a->n_kw) raise_error(&r->c, "cycle() takes no keyword arguments");
        if (a->n_pos == 0) raise_error(&r->c, "no items for cycling given");
        return a->pos[v.loop->index0 % a->n_pos];
    case M_CHANGED: {
        if (a->n_kw) raise_error(&r->c, "changed() takes no keyword arguments");
        List *now = new_list(&r->c, SEQ_TUPLE, a->n_pos);
        if (a->n_pos) memcpy(now->items, a->pos, a->n_pos * sizeof(Value));
        Value args = v_list(now);
        if (v.loop->changed_last.kind != V_MISSING && py_equal(&r->c, v.loop->changed_last, args)) return v_bool(false);
        v.loop->changed_last = args;
        return v_bool(true);
    }
    default:
        raise_error(&r->c, "%s.%s() is not supported", type_name(v), fn);
    }
}

static Value call_method(Render *r, Value self, int id, const Args *a) {
    if (methods[id].unsupported) raise_error(&r->c, "%s.%s() is not supported", type_name(self), methods[id].name);
    if (self.kind == V_STR) return str_method(r, self, (MethodId)id, a);
    return other_method(r, self, (MethodId)id, a);
}

/* ---- printf-style % and str.format ---- */

/* A format spec, from "%-05.2f" or from "{:<5.2f}". */
typedef struct {
    uint32_t fill;
    char align;        /* '<', '>', '^', '=' or 0 for the type's default */
    char sign;         /* '+', ' ', '-' or 0 */
    bool alt;          /* '#' */
    bool zero;         /* '0' */
    char grouping;     /* ',', '_' or 0 */
    int64_t width;     /* -1: none */
    int64_t precision; /* -1: none */
    char type;         /* the conversion, or 0 */
    bool percent;      /* the spec came from % (printf rules) */
} Spec;

static void pad_to(Buf *b, const Spec *sp, char default_align, Str sign_and_prefix, Str body) {
    size_t len = count_chars(sign_and_prefix.p, sign_and_prefix.n) + count_chars(body.p, body.n);
    size_t width = sp->width > 0 ? (size_t)sp->width : 0, margin = width > len ? width - len : 0;
    if (width > TEMPLATE_MAX_OUTPUT)
        raise_error(b->c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    char align = sp->align ? sp->align : default_align;
    uint32_t fill = sp->fill ? sp->fill : ' ';
    size_t left = align == '>' ? margin : align == '^' ? margin / 2 : 0;
    if (align == '=') {
        buf_addstr(b, sign_and_prefix);
        for (size_t i = 0; i < margin; i++) buf_addchar(b, fill);
        buf_addstr(b, body);
        return;
    }
    for (size_t i = 0; i < left; i++) buf_addchar(b, fill);
    buf_addstr(b, sign_and_prefix);
    buf_addstr(b, body);
    for (size_t i = left; i < margin; i++) buf_addchar(b, fill);
}

/* Digits of an integer in a base, grouped by sep every group digits. */
static void int_digits(char *out, uint64_t u, int base, bool upper, char sep, int group) {
    char tmp[96];
    int n = 0, since = 0;
    do {
        if (sep && since == group) {
            tmp[n++] = sep;
            since = 0;
        }
        int d = (int)(u % (unsigned)base);
        tmp[n++] = (char)(d < 10 ? '0' + d : (upper ? 'A' : 'a') + d - 10);
        u /= (unsigned)base;
        since++;
    } while (u);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
}

static void format_number(Render *r, Buf *b, Value v, const Spec *sp) {
    char type = sp->type;
    bool integer_type = type == 'd' || type == 'i' || type == 'u' || type == 'b' || type == 'o' || type == 'x' ||
                        type == 'X' || type == 'n' || type == 'c' || (type == 0 && is_integer(v));
    char prefix[8] = "", body[400];
    bool negative;
    if (integer_type) {
        if (v.kind == V_FLOAT) {
            if (!sp->percent || !(type == 'd' || type == 'i' || type == 'u'))
                raise_error(&r->c,
                            sp->percent ? "%%%c format: an integer is required, not float"
                                        : "Unknown format code '%c' for object of type 'float'",
                            type);
            if (!isfinite(v.f))
                raise_error(&r->c, "cannot convert float %s to integer", isnan(v.f) ? "NaN" : "infinity");
            if (fabs(v.f) >= 9.2e18) raise_overflow(r);
            v = v_int((int64_t)v.f);
        }
        int64_t i = int_of(v);
        if (type == 'c') {
            if (i < 0 || i > 0x10FFFF) raise_error(&r->c, "%%c arg not in range(0x110000)");
            char tmp[4];
            Spec s = *sp;
            s.precision = -1;
            pad_to(b, &s, '<', (Str){"", 0}, (Str){tmp, utf8_put((uint32_t)i, tmp)});
            return;
        }
        negative = i < 0;
        uint64_t u = negative ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
        int_digits(body, u, base, type == 'X', sp->grouping, base == 10 ? 3 : 4);
        if (sp->percent && sp->precision > (int64_t)strlen(body) && sp->precision < 300) {
            size_t n = strlen(body), add = (size_t)sp->precision - n;
            memmove(body + add, body, n + 1);
            memset(body, '0', add);
        }
        if (sp->alt && base != 10) snprintf(prefix, sizeof prefix, "0%c", type == 'b' ? 'b' : type == 'o' ? 'o' : type);
    } else {
        double f = float_of(v);
        negative = signbit(f) && !isnan(f);
        double a = fabs(f);
        int precision = sp->precision < 0 ? 6 : sp->precision > 300 ? 300 : (int)sp->precision;
        char t = type == '%' ? 'f' : type;
        if (type == '%') a *= 100;
        if (type == 0 && sp->precision < 0) format_float(body, a);
        else {
            char fmt[8] = "%";
            size_t k = 1;
            if (sp->alt) fmt[k++] = '#';
            fmt[k++] = '.';
            fmt[k++] = '*';
            fmt[k++] = t == 0 ? 'g' : t;
            fmt[k] = '\0';
            snprintf(body, sizeof body, fmt, precision, a);
        }
        if (type == '%') strcat(body, "%");
    }
    char sign[2] = {0, 0};
    if (negative) sign[0] = '-';
    else if (sp->sign == '+' || sp->sign == ' ') sign[0] = sp->sign;
    char lead[12];
    snprintf(lead, sizeof lead, "%s%s", sign, prefix);
    Spec s = *sp;
    if (sp->zero && !sp->align) {
        s.fill = '0';
        s.align = '=';
    }
    pad_to(b, &s, '>', str_c(lead), str_c(body));
}

/* Formats one value by a spec into b. */
static void format_one(Render *r, Buf *b, Value v, const Spec *sp) {
    char type = sp->type;
    if (type == 'r' || type == 'a' || type == 's' || (type == 0 && !is_number(v)) ||
        (!sp->percent && v.kind == V_STR)) {
        if (!sp->percent && type != 0 && type != 's')
            raise_error(&r->c, "Unknown format code '%c' for object of type '%s'", type, type_name(v));
        if (!sp->percent && !is_str(v) && !is_number(v) && (sp->width >= 0 || sp->precision >= 0 || sp->align || type))
            raise_error(&r->c, "unsupported format string passed to %s.__format__", type_name(v));
        Buf text = {.c = &r->c};
        write_value(r, &text, v, type == 'r' || type == 'a', 0);
        Str body = {text.p ? text.p : "", text.n};
        if (sp->precision >= 0 && (size_t)sp->precision < body.n)
            body.n = char_offset(r, (Value){.kind = V_STR, .ascii = all_ascii(body.p, body.n), .s = body},
                                 (size_t)sp->precision);
        pad_to(b, sp, '<', (Str){"", 0}, body);
        return;
    }
    if (v.kind == V_STR && type == 'c' && sp->percent) {
        if (count_chars(v.s.p, v.s.n) != 1) raise_error(&r->c, "%%c requires int or char");
        pad_to(b, sp, '<', (Str){"", 0}, v.s);
        return;
    }
    if (!is_number(v)) {
        if (sp->percent) raise_error(&r->c, "%%%c format: a real number is required, not %s", type, type_name(v));
        raise_error(&r->c, "Unknown format code '%c' for object of type '%s'", type, type_name(v));
    }
    if (strchr("dibouxXncDeEfFgG%", type) == NULL && type != 0)
        raise_error(&r->c, "unsupported format character '%c'", type);
    format_number(r, b, v, sp);
}

/* Python's fmt % args. */
static Value format_percent(Render *r, Value fmt, Value args) {
    Str f = fmt.s;
    Value *items = &args;
    size_t n_items = 1, next = 0;
    /* Python takes any object with items but a tuple or str as a mapping
     * (then unused arguments are no error) */
    bool is_mapping = args.kind == V_DICT || args.kind == V_UNDEFINED ||
                      (args.kind == V_LIST && args.list->type != SEQ_TUPLE && args.list->type <= SEQ_RANGE);
    if (is_seq(args, SEQ_TUPLE)) {
        items = args.list->items;
        n_items = args.list->len;
    }
    Buf b = {.c = &r->c};
    for (size_t i = 0; i < f.n;) {
        if (f.p[i] != '%') {
            const char *pct = memchr(f.p + i, '%', f.n - i);
            size_t end = pct ? (size_t)(pct - f.p) : f.n;
            buf_add(&b, f.p + i, end - i);
            i = end;
            continue;
        }
        i++;
        Spec sp = {.width = -1, .precision = -1, .percent = true};
        Value arg;
        bool have_arg = false;
        if (i < f.n && f.p[i] == '(') {
            if (!is_mapping) raise_error(&r->c, "format requires a mapping");
            if (args.kind == V_UNDEFINED) raise_undefined(&r->c, args);
            if (args.kind != V_DICT)
                raise_error(&r->c, "%s indices must be integers or slices, not str", type_name(args));
            size_t depth = 1, k = ++i;
            while (k < f.n && depth) {
                if (f.p[k] == '(') depth++;
                else if (f.p[k] == ')') depth--;
                k++;
            }
            if (depth) raise_error(&r->c, "incomplete format key");
            Value key = new_str(&r->c, f.p + i, k - 1 - i);
            Value *found = dict_get(&r->c, args.dict, key);
            if (!found) {
                Buf kb = {.c = &r->c};
                repr_str(&kb, key.s);
                raise_error(&r->c, "%.*s", (int)kb.n, kb.p);
            }
            arg = *found;
            have_arg = true;
            i = k;
        }
        for (; i < f.n && strchr("-+ #0", f.p[i]); i++) {
            if (f.p[i] == '-') sp.align = '<';
            else if (f.p[i] == '0') sp.zero = true;
            else if (f.p[i] == '#') sp.alt = true;
            else if (sp.sign != '+') sp.sign = f.p[i];
        }
        for (int part = 0; part < 2; part++) {
            if (part == 1) {
                if (i >= f.n || f.p[i] != '.') break;
                i++;
                sp.precision = 0;
            }
            int64_t *dst = part ? &sp.precision : &sp.width;
            if (i < f.n && f.p[i] == '*') {
                if (next >= n_items) raise_error(&r->c, "not enough arguments for format string");
                *dst = arg_int(r, "*", items[next++]);
                i++;
                if (part == 0 && *dst < 0) {
                    sp.align = '<';
                    *dst = -*dst;
                }
            } else
                while (i < f.n && is_digit(f.p[i])) {
                    if (*dst < 0) *dst = 0;
                    if (*dst > 100000000) raise_error(&r->c, "width too big");
                    *dst = *dst * 10 + (f.p[i++] - '0');
                }
        }
        while (i < f.n && strchr("hlL", f.p[i])) i++;
        if (i >= f.n) raise_error(&r->c, "incomplete format");
        char conv = f.p[i++];
        if (conv == '%') {
            buf_addc(&b, '%');
            continue;
        }
        if (sp.align == '<') sp.zero = false;
        sp.type = conv;
        if (!strchr("sradiuoxXeEfFgGc", conv)) {
            if ((unsigned char)conv >= 0x20 && (unsigned char)conv < 0x7F)
                raise_error(&r->c, "unsupported format character '%c' (0x%x) at index %zu", conv, conv, i - 1);
            raise_error(&r->c, "unsupported format character at index %zu", i - 1);
        }
        if (!have_arg) {
            if (next >= n_items) raise_error(&r->c, "not enough arguments for format string");
            arg = items[next++];
        }
        if (arg.kind == V_UNDEFINED && conv != 's' && conv != 'r' && conv != 'a') raise_undefined(&r->c, arg);
        format_one(r, &b, arg, &sp);
    }
    if (next < n_items && !is_mapping) raise_error(&r->c, "not all arguments converted during string formatting");
    return buf_value(&b);
}

/* Parses a str.format spec "[[fill]align][sign][#][0][width][,][.prec][type]". */
static void parse_format_spec(Render *r, Str s, Spec *sp) {
    *sp = (Spec){.width = -1, .precision = -1};
    size_t i = 0, used = 0;
    if (s.n) {
        uint32_t c = next_char(s.p, s.n, &used);
        if (used < s.n && strchr("<>=^", s.p[used])) {
            sp->fill = c;
            sp->align = s.p[used];
            i = used + 1;
        } else if (strchr("<>=^", s.p[0])) {
            sp->align = s.p[0];
            i = 1;
        }
    }
    if (i < s.n && strchr("+- ", s.p[i])) sp->sign = s.p[i++];
    if (i < s.n && s.p[i] == '#') {
        sp->alt = true;
        i++;
    }
    if (i < s.n && s.p[i] == '0') {
        sp->zero = true;
        i++;
    }
    while (i < s.n && is_digit(s.p[i])) {
        if (sp->width < 0) sp->width = 0;
        if (sp->width > 100000000) raise_error(&r->c, "Too many decimal digits in format string");
        sp->width = sp->width * 10 + (s.p[i++] - '0');
    }
    if (i < s.n && (s.p[i] == ',' || s.p[i] == '_')) sp->grouping = s.p[i++];
    if (i < s.n && s.p[i] == '.') {
        i++;
        sp->precision = 0;
        if (i >= s.n || !is_digit(s.p[i])) raise_error(&r->c, "Format specifier missing precision");
        while (i < s.n && is_digit(s.p[i])) {
            if (sp->precision > 100000000) raise_error(&r->c, "Too many decimal digits in format string");
            sp->precision = sp->precision * 10 + (s.p[i++] - '0');
        }
    }
    if (i < s.n) sp->type = s.p[i++];
    if (i < s.n) raise_error(&r->c, "Invalid format specifier");
}

/* The value a str.format field names: "0", "name", "0.attr", "name[key]". */
static Value format_field(Render *r, Str name, const Args *a, size_t *auto_index, int *numbering) {
    size_t i = 0;
    while (i < name.n && name.p[i] != '.' && name.p[i] != '[') i++;
    Str first = {name.p, i};
    Value v;
    bool numeric = first.n > 0;
    for (size_t k = 0; k < first.n; k++) numeric &= is_digit(first.p[k]);
    if (first.n == 0 || numeric) {
        size_t index;
        if (first.n == 0) {
            if (*numbering == 2)
                raise_error(&r->c, "cannot switch from manual field specification to automatic field numbering");
            *numbering = 1;
            index = (*auto_index)++;
        } else {
            if (*numbering == 1)
                raise_error(&r->c, "cannot switch from automatic field numbering to manual field specification");
            *numbering = 2;
            index = 0;
            for (size_t k = 0; k < first.n && index < 1000000; k++) index = index * 10 + (size_t)(first.p[k] - '0');
        }
        if (index >= a->n_pos)
            raise_error(&r->c, "Replacement index %zu out of range for positional args tuple", index);
        v = a->pos[index];
    } else {
        size_t k = 0;
        while (k < a->n_kw && !str_eq(r->t->names[a->kw_names[k]], first)) k++;
        if (k == a->n_kw) raise_error(&r->c, "'%.*s'", (int)(first.n < 64 ? first.n : 64), first.p);
        v = a->kw[k];
    }
    while (i < name.n) {
        if (name.p[i] == '.') {
            size_t j = ++i;
            while (j < name.n && name.p[j] != '.' && name.p[j] != '[') j++;
            Str attr = {name.p + i, j - i};
            v = get_attr(r, v, attr, find_method(attr));
            i = j;
        } else {
            size_t j = ++i;
            while (j < name.n && name.p[j] != ']') j++;
            if (j == name.n) raise_error(&r->c, "Missing ']' in format string");
            Str key = {name.p + i, j - i};
            bool digits = key.n > 0;
            for (size_t k = 0; k < key.n; k++) digits &= is_digit(key.p[k]);
            Value kv = v_str(key.p, key.n);
            if (digits) kv = v_int(strtoll(key.p, NULL, 10));
            v = get_item(r, v, kv);
            i = j + 1;
        }
    }
    return v;
}

/* Python's str.format, through the sandbox's attribute rules. */
static Value str_format(Render *r, Value fmt, const Args *a) {
    Str f = fmt.s;
    Buf b = {.c = &r->c};
    size_t auto_index = 0;
    int numbering = 0;
    for (size_t i = 0; i < f.n;) {
        char ch = f.p[i];
        if (ch == '}') {
            if (i + 1 < f.n && f.p[i + 1] == '}') {
                buf_addc(&b, '}');
                i += 2;
                continue;
            }
            raise_error(&r->c, "Single '}' encountered in format string");
        }
        if (ch != '{') {
            buf_addc(&b, ch);
            i++;
            continue;
        }
        if (i + 1 < f.n && f.p[i + 1] == '{') {
            buf_addc(&b, '{');
            i += 2;
            continue;
        }
        /* a replacement field: {name!conv:spec}, the spec may hold {fields} */
        size_t j = i + 1;
        int depth = 1;
        while (j < f.n && depth) {
            if (f.p[j] == '{') depth++;
            else if (f.p[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= f.n)
            raise_error(&r->c, depth ? "expected '}' before end of string" : "Single '{' encountered in format string");
        Str field = {f.p + i + 1, j - i - 1};
        size_t k = 0;
        while (k < field.n && field.p[k] != '!' && field.p[k] != ':') k++;
        Str name = {field.p, k};
        char conv = 0;
        if (k < field.n && field.p[k] == '!') {
            if (k + 1 >= field.n) raise_error(&r->c, "end of string while looking for conversion specifier");
            conv = field.p[k + 1];
            if (conv != 'r' && conv != 's' && conv != 'a') raise_error(&r->c, "Unknown conversion specifier %c", conv);
            k += 2;
            if (k < field.n && field.p[k] != ':') raise_error(&r->c, "expected ':' after conversion specifier");
        }
        Str spec_text = {"", 0};
        if (k < field.n && field.p[k] == ':') spec_text = (Str){field.p + k + 1, field.n - k - 1};
        Value v = format_field(r, name, a, &auto_index, &numbering);
        if (memchr(spec_text.p, '{', spec_text.n)) {
            Value inner = str_format(r, v_str(spec_text.p, spec_text.n), a);
            spec_text = inner.s;
        }
        if (conv == 'r' || conv == 'a') {
            Buf rb = {.c = &r->c};
            write_value(r, &rb, v, true, 0);
            v = buf_value(&rb);
        } else if (conv == 's') v = to_str(r, v);
        Spec sp;
        parse_format_spec(r, spec_text, &sp);
        if (v.kind == V_UNDEFINED && (sp.type || sp.width >= 0)) raise_undefined(&r->c, v);
        if (spec_text.n == 0) buf_addstr(&b, to_str(r, v).s);
        else format_one(r, &b, v, &sp);
        i = j + 1;
    }
    return buf_value(&b);
}

/* ---- filters ---- */

static Value apply_filter_id(Render *r, int id, Str name, Value v, const Args *a);
static bool apply_test_id(Render *r, int id, Str name, Value v, const Args *a);
static Value call_value(Render *r, Value callee, const Args *a);

/* jinja2's soft_str: Markup stays Markup, anything else becomes str. */
static Value soft_str(Render *r, Value v) { return to_str(r, v); }

/* The parts of an attribute path "a.b.0" (digits are list indices). */
static Value *attribute_parts(Render *r, Value attribute, size_t *n) {
    if (!is_str(attribute)) {
        Value *one = alloc(&r->c, sizeof *one);
        *one = attribute;
        *n = 1;
        return one;
    }
    List *l = split(r, attribute, v_str(".", 1), -1, false).list;
    for (size_t i = 0; i < l->len; i++) {
        Str part = l->items[i].s;
        bool digits = part.n > 0 && part.n < 19;
        for (size_t k = 0; k < part.n; k++) digits &= is_digit(part.p[k]);
        if (digits) l->items[i] = v_int(strtoll(part.p, NULL, 10));
    }
    *n = l->len;
    return l->items;
}

/* jinja2's make_attrgetter: item[part] for each part, with an optional
 * default for undefined results and lower-casing of str for sorting. */
static Value get_path(Render *r, Value item, const Value *parts, size_t n, Value dflt, bool lower) {
    for (size_t i = 0; i < n; i++) {
        item = get_item(r, item, parts[i]);
        if (given(dflt) && dflt.kind != V_NONE && item.kind == V_UNDEFINED) item = dflt;
    }
    if (lower && is_str(item)) item = change_case(r, item, CASE_LOWER);
    return item;
}

/* The sort keys of items: the items (or an attribute of each), lower-cased
 * unless case_sensitive. attribute may name several, "a,b". */
static Value *sort_keys(Render *r, List *items, Value attribute, bool case_sensitive) {
    Value *keys = alloc_array(&r->c, items->len ? items->len : 1, sizeof *keys);
    List *attrs = NULL;
    if (is_str(attribute)) attrs = split(r, attribute, v_str(",", 1), -1, false).list;
    for (size_t i = 0; i < items->len; i++) {
        if (!given(attribute) || attribute.kind == V_NONE)
            keys[i] = get_path(r, items->items[i], NULL, 0, v_missing(), !case_sensitive);
        else if (!attrs || attrs->len == 1) {
            size_t n;
            Value *parts = attribute_parts(r, attrs ? attrs->items[0] : attribute, &n);
            keys[i] = get_path(r, items->items[i], parts, n, v_missing(), !case_sensitive);
        } else {
            List *key = new_list(&r->c, SEQ_LIST, attrs->len);
            for (size_t k = 0; k < attrs->len; k++) {
                size_t n;
                Value *parts = attribute_parts(r, attrs->items[k], &n);
                key->items[k] = get_path(r, items->items[i], parts, n, v_missing(), !case_sensitive);
            }
            keys[i] = v_list(key);
        }
    }
    return keys;
}

/* select, reject, selectattr and rejectattr. */
static List *select_items(Render *r, Value v, const Args *a, bool attr, bool keep) {
    List *out = new_list(&r->c, SEQ_LIST, 0);
    if (truthy(v)) {
        if (attr && a->n_pos == 0) raise_error(&r->c, "Missing parameter for attribute name");
        size_t n_parts = 0, off = attr ? 1 : 0;
        Value *parts = attr ? attribute_parts(r, a->pos[0], &n_parts) : NULL;
        size_t n_rest = a->n_pos > off + 1 ? a->n_pos - off - 1 : 0;
        Args test_args = {n_rest ? a->pos + off + 1 : NULL, n_rest, a->kw_names, a->kw, a->n_kw};
        int test = -1;
        Str test_name = {"", 0};
        if (a->n_pos > off) {
            Value tn = a->pos[off];
            if (!is_str(tn)) raise_error(&r->c, "a test name must be a str");
            test_name = tn.s;
            test = find_test(tn.s);
            if (test < 0) raise_error(&r->c, "No test named '%.*s'.", (int)(tn.s.n < 64 ? tn.s.n : 64), tn.s.p);
        }
        size_t n;
        Value *items = iterate(r, v, &n);
        for (size_t i = 0; i < n; i++) {
            count_iteration(&r->c);
            Value x = attr ? get_path(r, items[i], parts, n_parts, v_missing(), false) : items[i];
            bool pass = test < 0 ? truthy(x) : apply_test_id(r, test, test_name, x, &test_args);
            if (pass == keep) list_push(&r->c, out, items[i]);
        }
    }
    return out;
}

static List *map_items(Render *r, Value v, const Args *a) {
    List *out = new_list(&r->c, SEQ_LIST, 0);
    if (!truthy(v)) return out;
    Value attribute = v_missing(), dflt = v_missing();
    bool by_attribute = false;
    if (a->n_pos == 0) {
        for (size_t k = 0; k < a->n_kw; k++) {
            Str name = r->t->names[a->kw_names[k]];
            if (str_is(name, "attribute")) {
                attribute = a->kw[k];
                by_attribute = true;
            } else if (str_is(name, "default")) dflt = a->kw[k];
            else raise_error(&r->c, "Unexpected keyword argument '%.*s'", (int)name.n, name.p);
        }
        if (!by_attribute && a->n_kw) raise_error(&r->c, "map requires a filter argument");
    }
    if (!by_attribute && a->n_pos == 0) raise_error(&r->c, "map requires a filter argument");
    size_t n_parts = 0;
    Value *parts = by_attribute ? attribute_parts(r, attribute, &n_parts) : NULL;
    int filter = -1;
    Str filter_name = {"", 0};
    if (!by_attribute) {
        if (!is_str(a->pos[0])) raise_error(&r->c, "a filter name must be a str");
        filter_name = a->pos[0].s;
        filter = find_filter(filter_name);
        if (filter < 0)
            raise_error(&r->c, "No filter named '%.*s'.", (int)(filter_name.n < 64 ? filter_name.n : 64),
                        filter_name.p);
    }
    Args rest = {a->n_pos > 1 ? a->pos + 1 : NULL, a->n_pos ? a->n_pos - 1 : 0, a->kw_names, a->kw, a->n_kw};
    size_t n;
    Value *items = iterate(r, v, &n);
    for (size_t i = 0; i < n; i++) {
        count_iteration(&r->c);
        list_push(&r->c, out,
                  by_attribute ? get_path(r, items[i], parts, n_parts, dflt, false)
                               : apply_filter_id(r, filter, filter_name, items[i], &rest));
    }
    return out;
}

/* Python's float(x) for the float filter: false when it cannot. */
static bool parse_float_text(Str s, double *out) {
    char tmp[128];
    size_t a = 0, b = s.n, used, n = 0;
    while (a < b && py_isspace(next_char(s.p + a, b - a, &used))) a += used;
    b = a + rstrip_len(s.p + a, b - a);
    if (b - a == 0 || b - a >= sizeof tmp) return false;
    for (size_t i = a; i < b; i++) {
        char ch = s.p[i];
        if (ch == '_') {
            if (i == a || i + 1 == b || !is_digit(s.p[i - 1]) || !is_digit(s.p[i + 1])) return false;
            continue;
        }
        if (!(is_digit(ch) || strchr("+-.eEinfatyINFATY", ch))) return false;
        tmp[n++] = ch;
    }
    tmp[n] = '\0';
    const char *t = tmp + (tmp[0] == '+' || tmp[0] == '-');
    if (strcasecmp(t, "inf") == 0 || strcasecmp(t, "infinity") == 0 || strcasecmp(t, "nan") == 0) {
        *out = strtod(tmp, NULL);
        return true;
    }
    for (const char *p = t; *p; p++)
        if (!(is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) return false;
    if (!is_digit(t[0]) && !(t[0] == '.' && is_digit(t[1]))) return false;
    char *end;
    *out = strtod(tmp, &end);
    return *end == '\0';
}

/* Python's int(text, base): false when it cannot. */
static bool parse_int_text(Str s, int64_t base, int64_t *out) {
    size_t a = 0, b = s.n, used;
    while (a < b && py_isspace(next_char(s.p + a, b - a, &used))) a += used;
    b = a + rstrip_len(s.p + a, b - a);
    bool negative = false;
    if (a < b && (s.p[a] == '+' || s.p[a] == '-')) negative = s.p[a++] == '-';
    if (b - a >= 2 && s.p[a] == '0' && strchr("xXoObB", s.p[a + 1])) {
        int prefix = (s.p[a + 1] | 32) == 'x' ? 16 : (s.p[a + 1] | 32) == 'o' ? 8 : 2;
        if (base == 0 || base == prefix) {
            base = prefix;
            a += 2;
            if (a < b && s.p[a] == '_') a++;
        }
    }
    if (base == 0) base = 10;
    if (base < 2 || base > 36 || a >= b) return false;
    uint64_t v = 0;
    for (size_t i = a; i < b; i++) {
        if (s.p[i] == '_' && i > a && i + 1 < b && s.p[i + 1] != '_') continue;
        int d = digit_value(s.p[i]);
        if ((s.p[i] | 32) >= 'g' && (s.p[i] | 32) <= 'z') d = (s.p[i] | 32) - 'a' + 10;
        if (d >= base) return false;
        if (v > (UINT64_C(9223372036854775807) - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = negative ? -(int64_t)v : (int64_t)v;
    return true;
}

static Value int_filter(Render *r, Value v, Value dflt, Value base) {
    Value fallback = given(dflt) ? dflt : v_int(0);
    int64_t b = given(base) ? arg_int(r, "int", base) : 10, i;
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_str(v)) {
        if (parse_int_text(v.s, b, &i)) return v_int(i);
        double f;
        if (!parse_float_text(v.s, &f) || isnan(f)) return fallback;
        v = v_float(f);
    }
    if (is_integer(v)) return v_int(int_of(v));
    if (v.kind == V_FLOAT) {
        if (isnan(v.f)) return fallback;
        if (isinf(v.f)) raise_error(&r->c, "cannot convert float infinity to integer");
        if (fabs(v.f) >= 9.2e18) raise_overflow(r);
        return v_int((int64_t)v.f);
    }
    return fallback;
}

static Value float_filter(Render *r, Value v, Value dflt) {
    Value fallback = given(dflt) ? dflt : v_float(0.0);
    double f;
    if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
    if (is_number(v)) return v_float(float_of(v));
    if (is_str(v) && parse_float_text(v.s, &f)) return v_float(f);
    return fallback;
}

/* Python's round(x, n), half to even on the exact binary value. */
static Value round_filter(Render *r, Value v, Value precision, Value method) {
    int64_t digits = given(precision) ? arg_int(r, "round", precision) : 0;
    Str how = given(method) && is_str(method) ? method.s : str_c("common");
    if (!str_is(how, "common") && !str_is(how, "ceil") && !str_is(how, "floor"))
        raise_error(&r->c, "method must be common, ceil or floor");
    if (!is_number(v)) raise_error(&r->c, "type %s doesn't define __round__ method", type_name(v));
    if (str_is(how, "common")) {
        if (is_integer(v)) {
            if (digits >= 0) return v_int(int_of(v));
            int64_t p = 1;
            for (int64_t k = 0; k < -digits && p < INT64_MAX / 10; k++) p *= 10;
            int64_t x = int_of(v), q = x / p, m = x % p;
            if (m < 0) {
                m += p;
                q--;
            }
            if (2 * m > p || (2 * m == p && (q & 1))) q++;
            return v_int(q * p);
        }
        if (!isfinite(v.f)) return v;
        if (digits > 300) return v;
        if (digits >= 0) {
            char tmp[400];
            snprintf(tmp, sizeof tmp, "%.*f", (int)digits, v.f);
            return v_float(strtod(tmp, NULL));
        }
        double p = pow(10.0, (double)-digits);
        return v_float(nearbyint(v.f / p) * p);
    }
    /* math.ceil/floor(value * 10**precision) / 10**precision */
    double scale = pow(10.0, (double)digits);
    double x = float_of(v) * scale;
    x = str_is(how, "ceil") ? ceil(x) : floor(x);
    return v_float(x / scale);
}

/* jinja2's title filter: upper-cases the first letter of every word
 * (words start after runs of - and white space and ({[<). */
static Value title_filter(Render *r, Value v) {
    Str s = v.s;
    Buf b = {.c = &r->c};
    bool start = true;
    for (size_t i = 0; i < s.n;) {
        size_t used;
        uint32_t c = next_char(s.p + i, s.n - i, &used);
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
        if (sep) buf_add(&b, s.p + i, used);
        else if (start) add_upper(&b, c);
        else buf_addchar(&b, char_lower(c));
        start = sep;
        i += used;
    }
    return buf_value(&b);
}

static Value indent_filter(Render *r, Value v, Value width, Value first, Value blank) {
    Str ind = {"    ", 4};
    if (given(width)) {
        if (is_str(width)) ind = width.s;
        else {
            int64_t w = arg_int(r, "indent", width);
            Buf sp = {.c = &r->c};
            for (int64_t k = 0; k < w && k < (int64_t)TEMPLATE_MAX_OUTPUT; k++) buf_addc(&sp, ' ');
            ind = (Str){sp.p ? sp.p : "", sp.n};
        }
    }
    /* the text gets a newline first, as jinja2 does, then splitlines() */
    Buf text = {.c = &r->c};
    buf_addstr(&text, v.s);
    buf_addc(&text, '\n');
    List *lines = splitlines(r, buf_value(&text), false).list;
    Buf b = {.c = &r->c};
    if (given(first) && truthy(first)) buf_addstr(&b, ind);
    for (size_t i = 0; i < lines->len; i++) {
        Str line = lines->items[i].s;
        if (i > 0) {
            buf_addc(&b, '\n');
            if (line.n || (given(blank) && truthy(blank))) buf_addstr(&b, ind);
        }
        buf_addstr(&b, line);
    }
    return buf_value(&b);
}

static Value truncate_filter(Render *r, Value v, Value length, Value killwords, Value end, Value leeway) {
    int64_t len = given(length) ? arg_int(r, "truncate", length) : 255;
    Str e = given(end) ? arg_str(r, "truncate() end ", end) : str_c("...");
    int64_t lee = given(leeway) && leeway.kind != V_NONE ? arg_int(r, "truncate", leeway) : 5;
    int64_t end_len = (int64_t)count_chars(e.p, e.n);
    if (len < end_len) raise_error(&r->c, "expected length >= %" PRId64 ", got %" PRId64, end_len, len);
    if (lee < 0) raise_error(&r->c, "expected leeway >= 0, got %" PRId64, lee);
    int64_t n = (int64_t)length_of(r, v);
    if (n <= len + lee) return v;
    Value head = substr(v, 0, char_offset(r, v, (size_t)(len - end_len)));
    Buf b = {.c = &r->c};
    if (given(killwords) && truthy(killwords)) buf_addstr(&b, head.s);
    else {
        const char *space = NULL;
        for (size_t k = head.s.n; k-- > 0;)
            if (head.s.p[k] == ' ') {
                space = head.s.p + k;
                break;
            }
        buf_add(&b, head.s.p, space ? (size_t)(space - head.s.p) : head.s.n);
    }
    buf_addstr(&b, e);
    return buf_value(&b);
}

static Value tojson_filter(Render *r, Value v, const Args *a) {
    static const char *const params[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    Value arg[4];
    bind_args(r, "tojson", a, params, arg);
    JsonStyle st = {.ensure_ascii = given(arg[0]) && truthy(arg[0]), .sort_keys = given(arg[3]) && truthy(arg[3])};
    Value indent = arg[1];
    if (given(indent) && indent.kind != V_NONE) {
        st.has_indent = true;
        if (is_str(indent)) st.indent = indent.s;
        else {
            int64_t n = arg_int(r, "tojson", indent);
            Buf sp = {.c = &r->c};
            for (int64_t k = 0; k < n && k < 1000; k++) buf_addc(&sp, ' ');
            st.indent = (Str){sp.p ? sp.p : "", sp.n};
        }
    }
    st.item_sep = st.has_indent ? str_c(",") : str_c(", ");
    st.key_sep = str_c(": ");
    Value sep = arg[2];
    if (given(sep) && sep.kind != V_NONE) {
        if (sep.kind != V_LIST || sep.list->len != 2 || !is_str(sep.list->items[0]) || !is_str(sep.list->items[1]))
            raise_error(&r->c, "separators must be a pair of str");
        st.item_sep = sep.list->items[0].s;
        st.key_sep = sep.list->items[1].s;
    }
    Buf b = {.c = &r->c};
    json_dump(&r->c, &b, v, &st, 0);
    return buf_value(&b);
}

/* Python's sum(items, start) with +. */
static Value sum_filter(Render *r, Value v, Value attribute, Value start) {
    Value total = given(start) ? start : v_int(0);
    if (is_str(total)) raise_error(&r->c, "sum() can't sum strings [use ''.join(seq) instead]");
    size_t n, n_parts = 0;
    Value *items = iterate(r, v, &n);
    Value *parts = given(attribute) && attribute.kind != V_NONE ? attribute_parts(r, attribute, &n_parts) : NULL;
    for (size_t i = 0; i < n; i++) {
        count_iteration(&r->c);
        total = arith(r, OP_ADD, total, parts ? get_path(r, items[i], parts, n_parts, v_missing(), false) : items[i]);
    }
    return total;
}

static Value min_max(Render *r, Value v, Value case_sensitive, Value attribute, bool max) {
    List *items = to_list(r, v);
    if (items->len == 0) return undefined_hint(&r->c, "No aggregated item, sequence was empty.");
    Value *keys = sort_keys(r, items, attribute, given(case_sensitive) && truthy(case_sensitive));
    size_t best = 0;
    for (size_t i = 1; i < items->len; i++)
        if (py_order(&r->c, max ? CMP_GT : CMP_LT, keys[i], keys[best])) best = i;
    return items->items[best];
}

static List *unique_filter(Render *r, Value v, Value case_sensitive, Value attribute) {
    List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, 0);
    Value *keys = sort_keys(r, items, attribute, given(case_sensitive) && truthy(case_sensitive));
    Dict *seen = new_dict(&r->c, 0);
    for (size_t i = 0; i < items->len; i++) {
        count_iteration(&r->c);
        if (dict_get(&r->c, seen, keys[i])) continue;
        dict_set(&r->c, seen, keys[i], v_none());
        list_push(&r->c, out, items->items[i]);
    }
    return out;
}

static List *batch_or_slice(Render *r, Value v, Value count, Value fill, bool slice) {
    int64_t k = arg_int(r, slice ? "slice" : "batch", count);
    bool filling = given(fill) && fill.kind != V_NONE;
    List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, 0);
    if (!slice) {
        if (k <= 0) raise_error(&r->c, "batch size must be positive");
        for (size_t i = 0; i < items->len; i += (size_t)k) {
            size_t n = items->len - i < (size_t)k ? items->len - i : (size_t)k;
            List *part = new_list(&r->c, SEQ_LIST, filling ? (size_t)k : n);
            memcpy(part->items, items->items + i, n * sizeof(Value));
            for (size_t j = n; j < part->len; j++) part->items[j] = fill;
            list_push(&r->c, out, v_list(part));
        }
        return out;
    }
    if (k <= 0) raise_error(&r->c, k == 0 ? "integer division or modulo by zero" : "slice count must be positive");
    if (k > (int64_t)TEMPLATE_MAX_ITERATIONS) raise_error(&r->c, "too many slices");
    size_t per = items->len / (size_t)k, extra = items->len % (size_t)k, offset = 0;
    for (size_t s = 0; s < (size_t)k; s++) {
        count_iteration(&r->c);
        size_t start = offset + s * per;
        if (s < extra) offset++;
        size_t end = offset + (s + 1) * per, n = end - start;
        List *part = new_list(&r->c, SEQ_LIST, n + (filling && s >= extra));
        if (n) memcpy(part->items, items->items + start, n * sizeof(Value));
        if (filling && s >= extra) part->items[n] = fill;
        list_push(&r->c, out, v_list(part));
    }
    return out;
}

/* A generator filter (map, select, items, ...) waiting to run. */
static Value lazy_generator(Render *r, int filter, Value v, const Args *a) {
    Iter *it = alloc(&r->c, sizeof *it);
    Args *args = alloc(&r->c, sizeof *args); /* a is the caller's: keep a copy (its arrays are in the arena) */
    *args = *a;
    *it = (Iter){.type_name = "generator", .filter = filter, .source = v, .args = args};
    return (Value){.kind = V_ITER, .iter = it};
}

/* Runs a generator filter, the first time its items are asked for. */
static List *generator_items(Render *r, Iter *it) {
    if (it->list) return it->list;
    static const char *const none[] = {NULL};
    static const char *const p_minmax[] = {"case_sensitive", "attribute", NULL};
    static const char *const p_batch[] = {"linecount", "fill_with", NULL};
    static const char *const p_slice[] = {"slices", "fill_with", NULL};
    const Args *a = it->args;
    Value v = it->source, arg[2];
    List *l;
    switch (it->filter) {
    case FI_BATCH:
        bind_args(r, "batch", a, p_batch, arg);
        l = batch_or_slice(r, v, arg[0], arg[1], false);
        break;
    case FI_SLICE:
        bind_args(r, "slice", a, p_slice, arg);
        l = batch_or_slice(r, v, arg[0], arg[1], true);
        break;
    case FI_ITEMS:
        bind_args(r, "items", a, none, arg);
        if (v.kind == V_UNDEFINED) l = new_list(&r->c, SEQ_LIST, 0);
        else if (v.kind != V_DICT) raise_error(&r->c, "Can only get item pairs from a mapping.");
        else {
            l = dict_view(r, v.dict, SEQ_ITEMS).list;
            l->type = SEQ_LIST;
        }
        break;
    case FI_MAP:
        l = map_items(r, v, a);
        break;
    case FI_REJECT:
    case FI_REJECTATTR:
    case FI_SELECT:
    case FI_SELECTATTR:
        l = select_items(r, v, a, it->filter == FI_REJECTATTR || it->filter == FI_SELECTATTR,
                         it->filter == FI_SELECT || it->filter == FI_SELECTATTR);
        break;
    default: /* FI_UNIQUE */
        bind_args(r, "unique", a, p_minmax, arg);
        l = unique_filter(r, v, arg[0], arg[1]);
    }
    it->list = l;
    return l;
}

static Value apply_filter_id(Render *r, int id, Str name, Value v, const Args *a) {
    static const char *const none[] = {NULL};
    static const char *const p_default[] = {"default_value", "boolean", NULL};
    static const char *const p_join[] = {"d", "attribute", NULL};
    static const char *const p_replace[] = {"old", "new", "count", NULL};
    static const char *const p_trim[] = {"chars", NULL};
    static const char *const p_int[] = {"default", "base", NULL};
    static const char *const p_float[] = {"default", NULL};
    static const char *const p_round[] = {"precision", "method", NULL};
    static const char *const p_sort[] = {"reverse", "case_sensitive", "attribute", NULL};
    static const char *const p_dictsort[] = {"case_sensitive", "by", "reverse", NULL};
    static const char *const p_minmax[] = {"case_sensitive", "attribute", NULL};
    static const char *const p_center[] = {"width", NULL};
    static const char *const p_indent[] = {"width", "first", "blank", NULL};
    static const char *const p_truncate[] = {"length", "killwords", "end", "leeway", NULL};
    static const char *const p_sum[] = {"attribute", "start", NULL};
    static const char *const p_attr[] = {"name", NULL};
    Value arg[4];
    if (id < 0) raise_error(&r->c, "No filter named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    const char *fn = filter_name((FilterId)id);
    switch (id) {
    case FI_ABS:
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_FLOAT) return v_float(fabs(v.f));
        if (is_integer(v)) return negate(r, v, int_of(v) < 0);
        raise_error(&r->c, "bad operand type for abs(): '%s'", type_name(v));
    case FI_ATTR: {
        bind_args(r, fn, a, p_attr, arg);
        Str attr = arg_str(r, "attribute name ", arg[0]);
        Value out;
        if (v.kind == V_NAMESPACE) {
            Value *found = dict_get_str(&r->c, v.dict, attr);
            if (found) return *found;
        } else if (v.kind == V_LOOP && loop_attribute(r, v.loop, attr, &out)) return out;
        else if (python_attribute(r, v, find_method(attr), &out)) return out;
        if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
        return undefined_member(&r->c, v, arg[0]);
    }
    case FI_BATCH:
    case FI_SLICE:
    case FI_ITEMS:
    case FI_MAP:
    case FI_REJECT:
    case FI_REJECTATTR:
    case FI_SELECT:
    case FI_SELECTATTR:
    case FI_UNIQUE:
        return lazy_generator(r, id, v, a);
    case FI_CAPITALIZE:
        bind_args(r, fn, a, none, arg);
        return change_case(r, soft_str(r, v), CASE_CAPITALIZE);
    case FI_CENTER:
        bind_args(r, fn, a, p_center, arg);
        return pad(r, soft_str(r, v), given(arg[0]) ? arg_int(r, fn, arg[0]) : 80, v_missing(), 0);
    case FI_DEFAULT:
        bind_args(r, fn, a, p_default, arg);
        if (v.kind == V_UNDEFINED || (given(arg[1]) && truthy(arg[1]) && !truthy(v)))
            return given(arg[0]) ? arg[0] : v_str("", 0);
        return v;
    case FI_DICTSORT: {
        bind_args(r, fn, a, p_dictsort, arg);
        if (v.kind != V_DICT) {
            if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
            raise_error(&r->c, "'%s' object has no attribute 'items'", type_name(v));
        }
        Str by = !given(arg[1]) ? str_c("key") : is_str(arg[1]) ? arg[1].s : str_c("");
        if (!str_is(by, "key") && !str_is(by, "value"))
            raise_error(&r->c, "You can only sort by either \"key\" or \"value\"");
        List *pairs = dict_view(r, v.dict, SEQ_ITEMS).list;
        pairs->type = SEQ_LIST;
        List *keys = new_list(&r->c, SEQ_LIST, pairs->len);
        for (size_t i = 0; i < pairs->len; i++) keys->items[i] = pairs->items[i].list->items[str_is(by, "value")];
        Value *k = sort_keys(r, keys, v_missing(), given(arg[0]) && truthy(arg[0]));
        size_t *order = alloc_array(&r->c, pairs->len ? pairs->len : 1, sizeof *order);
        for (size_t i = 0; i < pairs->len; i++) order[i] = i;
        sort_values(&r->c, k, order, pairs->len, given(arg[2]) && truthy(arg[2]));
        List *out = new_list(&r->c, SEQ_LIST, pairs->len);
        for (size_t i = 0; i < pairs->len; i++) out->items[i] = pairs->items[order[i]];
        return v_list(out);
    }
    case FI_ESCAPE:
        bind_args(r, fn, a, none, arg);
        return html_escape(r, v);
    case FI_FIRST: {
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_ITER) {
            List *l = generator_items(r, v.iter);
            if (v.iter->pos < l->len) return l->items[v.iter->pos++];
        } else {
            size_t n;
            Value *items = iterate(r, v, &n);
            if (n) return items[0];
        }
        return undefined_hint(&r->c, "No first item, sequence was empty.");
    }
    case FI_LAST: {
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_ITER) raise_error(&r->c, "'%s' object is not reversible", v.iter->type_name);
        if (v.kind != V_LIST && v.kind != V_DICT && v.kind != V_STR && v.kind != V_UNDEFINED)
            raise_error(&r->c, "'%s' object is not reversible", type_name(v));
        size_t n;
        Value *items = iterate(r, v, &n);
        if (n) return items[n - 1];
        return undefined_hint(&r->c, "No last item, sequence was empty.");
    }
    case FI_FLOAT:
        bind_args(r, fn, a, p_float, arg);
        return float_filter(r, v, arg[0]);
    case FI_FORMAT: {
        if (a->n_pos && a->n_kw) raise_error(&r->c, "can't handle positional and keyword arguments at the same time");
        Value values;
        if (a->n_kw) {
            Dict *d = new_dict(&r->c, a->n_kw);
            for (size_t k = 0; k < a->n_kw; k++) {
                Str kn = r->t->names[a->kw_names[k]];
                dict_set(&r->c, d, v_str(kn.p, kn.n), a->kw[k]);
            }
            values = v_dict(d);
        } else {
            List *t = new_list(&r->c, SEQ_TUPLE, a->n_pos);
            if (a->n_pos) memcpy(t->items, a->pos, a->n_pos * sizeof(Value));
            values = v_list(t);
        }
        return format_percent(r, soft_str(r, v), values);
    }
    case FI_INDENT:
        bind_args(r, fn, a, p_indent, arg);
        /* jinja2 adds "\n" to the value itself, then splits its lines */
        if (v.kind == V_UNDEFINED) raise_undefined(&r->c, v);
        if (is_seq(v, SEQ_TUPLE)) raise_error(&r->c, "can only concatenate tuple (not \"str\") to tuple");
        if (is_seq(v, SEQ_LIST)) raise_error(&r->c, "'list' object has no attribute 'splitlines'");
        if (!is_str(v)) raise_error(&r->c, "unsupported operand type(s) for +=: '%s' and 'str'", type_name(v));
        return indent_filter(r, v, arg[0], arg[1], arg[2]);
    case FI_INT:
        bind_args(r, fn, a, p_int, arg);
        return int_filter(r, v, arg[0], arg[1]);
    case FI_JOIN: {
        bind_args(r, fn, a, p_join, arg);
        Str sep = given(arg[0]) ? to_str(r, arg[0]).s : (Str){"", 0};
        if (given(arg[1]) && arg[1].kind != V_NONE) {
            size_t n, n_parts;
            Value *items = iterate(r, v, &n), *parts = attribute_parts(r, arg[1], &n_parts);
            List *picked = new_list(&r->c, SEQ_LIST, n);
            for (size_t i = 0; i < n; i++) picked->items[i] = get_path(r, items[i], parts, n_parts, v_missing(), false);
            v = v_list(picked);
        }
        return join(r, sep, v, true);
    }
    case FI_LENGTH:
        bind_args(r, fn, a, none, arg);
        return v_int((int64_t)length_of(r, v));
    case FI_LIST:
        bind_args(r, fn, a, none, arg);
        if (v.kind == V_LIST) {
            List *l = new_list(&r->c, SEQ_LIST, v.list->len);
            if (v.list->len) memcpy(l->items, v.list->items, v.list->len * sizeof(Value));
            return v_list(l);
        }
        return v_list(to_list(r, v));
    case FI_LOWER:
    case FI_UPPER:
        bind_args(r, fn, a, none, arg);
        return change_case(r, soft_str(r, v), id == FI_UPPER ? CASE_UPPER : CASE_LOWER);
    case FI_MAX:
    case FI_MIN:
        bind_args(r, fn, a, p_minmax, arg);
        return min_max(r, v, arg[0], arg[1], id == FI_MAX);
    case FI_REPLACE:
        bind_args(r, fn, a, p_replace, arg);
        if (!given(arg[1])) raise_error(&r->c, "replace() missing required arguments");
        return replace(r, soft_str(r, v), to_str(r, arg[0]).s, to_str(r, arg[1]).s,
                       given(arg[2]) && arg[2].kind != V_NONE ? arg_int(r, fn, arg[2]) : -1);
    case FI_REVERSE: {
        bind_args(r, fn, a, none, arg);
        if (is_str(v)) {
            Value one = v_int(-1);
            return get_slice(r, v, v_missing(), v_missing(), one, false);
        }
        /* reversed(): an undefined value has a length (0) and items, so it reverses too */
        bool reversible = v.kind == V_LIST || v.kind == V_DICT || v.kind == V_UNDEFINED;
        if (!reversible && v.kind != V_ITER) raise_error(&r->c, "argument must be iterable");
        List *items = to_list(r, v), *out = new_list(&r->c, SEQ_LIST, items->len);
        for (size_t i = 0; i < items->len; i++) out->items[i] = items->items[items->len - 1 - i];
        if (!reversible) return v_list(out);
        return new_iter(r, out,
                        v.kind == V_DICT                               ? "dict_reversekeyiterator"
                        : v.kind == V_LIST && v.list->type == SEQ_LIST ? "list_reverseiterator"
                                                                       : "reversed");
    }
    case FI_ROUND:
        bind_args(r, fn, a, p_round, arg);
        return round_filter(r, v, arg[0], arg[1]);
    case FI_SAFE:
        bind_args(r, fn, a, none, arg);
        return markup(to_str(r, v));
    case FI_SORT: {
        bind_args(r, fn, a, p_sort, arg);
        List *items = to_list(r, v);
        Value *keys = sort_keys(r, items, arg[2], given(arg[1]) && truthy(arg[1]));
        size_t *order = alloc_array(&r->c, items->len ? items->len : 1, sizeof *order);
        for (size_t i = 0; i < items->len; i++) order[i] = i;
        sort_values(&r->c, keys, order, items->len, given(arg[0]) && truthy(arg[0]));
        List *out = new_list(&r->c, SEQ_LIST, items->len);
        for (size_t i = 0; i < items->len; i++) out->items[i] = items->items[order[i]];
        return v_list(out);
    }
    case FI_STRING:
        bind_args(r, fn, a, none, arg);
        return soft_str(r, v);
    case FI_SUM:
        bind_args(r, fn, a, p_sum, arg);
        return sum_filter(r, v, arg[0], arg[1]);
    case FI_TITLE:
        bind_args(r, fn, a, none, arg);
        return title_filter(r, soft_str(r, v));
    case FI_TOJSON:
        return tojson_filter(r, v, a);
    case FI_TRIM:
        bind_args(r, fn, a, p_trim, arg);
        return strip(r, soft_str(r, v), arg[0], true, true);
    case FI_TRUNCATE:
        bind_args(r, fn, a, p_truncate, arg);
        if (!is_str(v)) {
            /* jinja2 truncates the value itself: what is short enough comes back as it is */
            size_t n = length_of(r, v);
            int64_t max = (given(arg[0]) ? arg_int(r, fn, arg[0]) : 255) +
                          (given(arg[3]) && arg[3].kind != V_NONE ? arg_int(r, fn, arg[3]) : 5);
            if ((int64_t)n <= max) return v;
            raise_error(&r->c, "truncate needs a str, not %s", type_name(v));
        }
        return truncate_filter(r, soft_str(r, v), arg[0], arg[1], arg[2], arg[3]);
    case FI_WORDCOUNT: {
        bind_args(r, fn, a, none, arg);
        Str s = soft_str(r, v).s;
        int64_t words = 0;
        bool in_word = false;
        for (size_t i = 0; i < s.n;) {
            size_t used;
            uint32_t c = next_char(s.p + i, s.n - i, &used);
            bool w = c == '_' || (unicode_class(c) & (UNICODE_LETTER | UNICODE_NUMBER));
            words += w && !in_word;
            in_word = w;
            i += used;
        }
        return v_int(words);
    }
    default: /* FI_UNSUPPORTED */
        raise_error(&r->c, "the filter '%.*s' is not supported", (int)name.n, name.p);
    }
}

/* ---- tests ---- */

static bool apply_test_id(Render *r, int id, Str name, Value v, const Args *a) {
    static const char *const one[] = {"other", NULL};
    Value arg[1];
    if (id < 0) raise_error(&r->c, "No test named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    switch (id) {
    case TE_DIVISIBLEBY:
    case TE_EQ:
    case TE_NE:
    case TE_LT:
    case TE_LE:
    case TE_GT:
    case TE_GE:
    case TE_IN:
    case TE_SAMEAS:
        bind_args(r, "test", a, one, arg);
        if (!given(arg[0])) raise_error(&r->c, "the test '%.*s' needs an argument", (int)name.n, name.p);
        break;
    default:
        if (a->n_pos || a->n_kw)
            raise_error(&r->c, "test_%.*s() takes 1 positional argument but %zu were given", (int)name.n, name.p,
                        a->n_pos + a->n_kw + 1);
        arg[0] = v_missing();
    }
    Value x = arg[0];
    switch (id) {
    case TE_BOOLEAN:
        return v.kind == V_BOOL;
    case TE_CALLABLE:
        return v.kind == V_MACRO || v.kind == V_FUNC || v.kind == V_METHOD || v.kind == V_LOOP || v.kind == V_UNDEFINED;
    case TE_DEFINED:
        return v.kind != V_UNDEFINED;
    case TE_UNDEFINED:
        return v.kind == V_UNDEFINED;
    case TE_DIVISIBLEBY:
        return py_equal(&r->c, arith(r, OP_MOD, v, x), v_int(0));
    case TE_EQ:
        return compare(r, CMP_EQ, v, x);
    case TE_NE:
        return compare(r, CMP_NE, v, x);
    case TE_LT:
        return compare(r, CMP_LT, v, x);
    case TE_LE:
        return compare(r, CMP_LE, v, x);
    case TE_GT:
        return compare(r, CMP_GT, v, x);
    case TE_GE:
        return compare(r, CMP_GE, v, x);
    case TE_IN:
        return contains(r, x, v);
    case TE_ESCAPED:
        return v.kind == V_STR && v.markup;
    case TE_EVEN:
    case TE_ODD:
        return py_equal(&r->c, arith(r, OP_MOD, v, v_int(2)), v_int(id == TE_ODD));
    case TE_FALSE:
        return v.kind == V_BOOL && !v.b;
    case TE_TRUE:
        return v.kind == V_BOOL && v.b;
    case TE_FILTER:
        return is_str(v) && find_filter(v.s) >= 0;
    case TE_TEST:
        return is_str(v) && find_test(v.s) >= 0;
    case TE_FLOAT:
        return v.kind == V_FLOAT;
    case TE_INTEGER:
        return v.kind == V_INT;
    case TE_ITERABLE:
        return v.kind == V_STR || v.kind == V_LIST || v.kind == V_DICT || v.kind == V_ITER || v.kind == V_UNDEFINED ||
               v.kind == V_LOOP;
    case TE_LOWER:
    case TE_UPPER: {
        Value s = to_str(r, v);
        return str_predicate(s, id == TE_LOWER ? M_ISLOWER : M_ISUPPER).b;
    }
    case TE_MAPPING:
        return v.kind == V_DICT;
    case TE_NONE:
        return v.kind == V_NONE;
    case TE_NUMBER:
        return is_number(v);
    case TE_SAMEAS:
        if (v.kind != x.kind) return false;
        if (v.kind == V_NONE || v.kind == V_UNDEFINED) return v.kind == V_NONE;
        if (v.kind == V_BOOL) return v.b == x.b;
        if (v.kind == V_INT) return v.i == x.i && v.i >= -5 && v.i <= 256; /* CPython's cached small ints */
        if (v.kind == V_STR) return str_eq(v.s, x.s);                      /* equal constants are one object */
        if (v.kind == V_FLOAT) return false;
        return v.list == x.list;
    case TE_SEQUENCE:
        return v.kind == V_STR || v.kind == V_DICT || v.kind == V_UNDEFINED ||
               (v.kind == V_LIST && v.list->type <= SEQ_RANGE);
    case TE_STRING:
        return v.kind == V_STR;
    default:
        raise_error(&r->c, "No test named '%.*s' found.", (int)(name.n < 64 ? name.n : 64), name.p);
    }
}

/* ---- calls ---- */

static Flow exec_body(Render *r, Nodes body, Scope *s);
static void run_for(Render *r, const Node *n, Scope *s, Value iterable, int depth0);

static const char *macro_name(const Macro *m) { return m->node->value.s.p; }

/* Starts capturing output (macro calls, set blocks): returns where the
 * captured text starts. */
static size_t capture_begin(Render *r) { return r->out.n; }

static Value capture_end(Render *r, size_t start) {
    Value v = r->out.n > start ? new_str(&r->c, r->out.p + start, r->out.n - start) : v_str("", 0);
    r->out.n = start;
    return v;
}

static Value call_macro(Render *r, const Macro *m, const Args *a) {
    const Node *node = m->node;
    const char *name = macro_name(m);
    size_t n_params = node->kw.n;
    if (a->n_pos > n_params && !(node->op & MACRO_VARARGS))
        raise_error(&r->c, "macro '%s' takes not more than %zu argument(s)", name, n_params);
    Scope *s = new_frame(r, m->closure, node);
    Value *vals = alloc_array(&r->c, n_params ? n_params : 1, sizeof *vals);
    for (size_t i = 0; i < n_params; i++) vals[i] = i < a->n_pos ? a->pos[i] : v_missing();
    Dict *kwargs = new_dict(&r->c, 0);
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i = 0;
        while (i < n_params && node->kw.at[i]->name != a->kw_names[k]) i++;
        Str kn = r->t->names[a->kw_names[k]];
        if (i == n_params) {
            if (!(node->op & MACRO_KWARGS))
                raise_error(&r->c, "macro '%s' takes no keyword argument '%.*s'", name, (int)kn.n, kn.p);
            dict_set(&r->c, kwargs, v_str(kn.p, kn.n), a->kw[k]);
            continue;
        }
        if (given(vals[i]))
            raise_error(&r->c, "macro '%s' got multiple values for argument '%.*s'", name, (int)kn.n, kn.p);
        vals[i] = a->kw[k];
    }
    int line = r->c.line;
    for (size_t i = 0; i < n_params; i++) {
        const Node *param = node->kw.at[i];
        if (!given(vals[i])) {
            if (param->a) vals[i] = eval(r, param->a, s);
            else {
                Str pn = r->t->names[param->name];
                char hint[128];
                snprintf(hint, sizeof hint, "parameter '%.*s' was not provided", (int)(pn.n < 64 ? pn.n : 64), pn.p);
                vals[i] = undefined_hint(&r->c, new_str(&r->c, hint, strlen(hint)).s.p);
            }
        }
        scope_set(r, s, param->name, vals[i]);
    }
    if (node->op & MACRO_VARARGS) {
        size_t extra = a->n_pos > n_params ? a->n_pos - n_params : 0;
        List *t = new_list(&r->c, SEQ_TUPLE, extra);
        if (extra) memcpy(t->items, a->pos + n_params, extra * sizeof(Value));
        scope_set(r, s, NAME_VARARGS, v_list(t));
    }
    if (node->op & MACRO_KWARGS) scope_set(r, s, NAME_KWARGS, v_dict(kwargs));
    enter_depth(r);
    size_t start = capture_begin(r);
    exec_body(r, node->list, s);
    Value out = capture_end(r, start);
    r->depth--;
    r->c.line = line;
    return out;
}

/* The dict() and namespace() constructors: a mapping or pairs, then name=value. */
static Dict *build_dict(Render *r, const char *fn, const Args *a) {
    Dict *d = new_dict(&r->c, 0);
    if (a->n_pos > 1) raise_error(&r->c, "%s expected at most 1 argument, got %zu", fn, a->n_pos);
    if (a->n_pos == 1) {
        Value src = a->pos[0];
        if (src.kind == V_DICT || src.kind == V_NAMESPACE) {
            for (size_t i = 0; i < src.dict->len; i++) dict_set(&r->c, d, src.dict->keys[i], src.dict->vals[i]);
        } else {
            size_t n;
            Value *items = iterate(r, src, &n);
            for (size_t i = 0; i < n; i++) {
                size_t m;
                Value *pair = iterate(r, items[i], &m);
                if (m != 2)
                    raise_error(&r->c, "dictionary update sequence element #%zu has length %zu; 2 is required", i, m);
                dict_set(&r->c, d, pair[0], pair[1]);
            }
        }
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        Str kn = r->t->names[a->kw_names[k]];
        dict_set(&r->c, d, v_str(kn.p, kn.n), a->kw[k]);
    }
    return d;
}

static Value call_range(Render *r, const Args *a) {
    if (a->n_kw) raise_error(&r->c, "range() takes no keyword arguments");
    if (a->n_pos < 1 || a->n_pos > 3) raise_error(&r->c, "range expected 1 to 3 arguments, got %zu", a->n_pos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n_pos; i++) {
        if (!is_integer(a->pos[i]))
            raise_error(&r->c, "'%s' object cannot be interpreted as an integer", type_name(a->pos[i]));
        v[a->n_pos == 1 ? 1 : i] = int_of(a->pos[i]);
    }
    if (v[2] == 0) raise_error(&r->c, "range() arg 3 must not be zero");
    /* the number of items, as Python counts them */
    uint64_t n = 0;
    if (v[2] > 0 && v[1] > v[0]) n = ((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1;
    if (v[2] < 0 && v[0] > v[1]) n = ((uint64_t)v[0] - (uint64_t)v[1] - 1) / (0 - (uint64_t)v[2]) + 1;
    if (n > JINJA_MAX_RANGE)
        raise_error(&r->c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", JINJA_MAX_RANGE);
    List *l = new_list(&r->c, SEQ_RANGE, (size_t)n);
    for (size_t i = 0; i < n; i++) l->items[i] = v_int(v[0] + (int64_t)i * v[2]);
    memcpy(l->range, v, sizeof v);
    return v_list(l);
}

static Value call_strftime(Render *r, const Args *a) {
    static const char *const params[] = {"format", NULL};
    Value arg[1];
    bind_args(r, "strftime_now", a, params, arg);
    if (!given(arg[0])) raise_error(&r->c, "strftime_now() missing 1 required positional argument: 'format'");
    Str f = arg_str(r, "strftime() argument 1 ", arg[0]);
    /* Python fills in %f (microseconds) itself; %z and %Z are empty for
     * the naive datetime.now(). The rest is the C library's strftime. */
    Buf fmt = {.c = &r->c};
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] == '%' && i + 1 < f.n) {
            char c = f.p[i + 1];
            if (c == 'f') buf_addf(&fmt, "%06ld", r->microseconds);
            else if (c == 'z' || c == 'Z') {
            } else {
                buf_addc(&fmt, '%');
                buf_addc(&fmt, c);
            }
            i++;
        } else buf_addc(&fmt, f.p[i]);
    }
    buf_addc(&fmt, '\0');
    size_t cap = fmt.n * 16 + 256;
    char *out = alloc(&r->c, cap);
    size_t n = strftime(out, cap, fmt.p, &r->now);
    return new_str(&r->c, out, n);
}

static Value call_value(Render *r, Value callee, const Args *a) {
    switch (callee.kind) {
    case V_MACRO:
        return call_macro(r, callee.macro, a);
    case V_METHOD:
        return call_method(r, callee.method->self, callee.method->id, a);
    case V_UNDEFINED:
        raise_undefined(&r->c, callee);
    case V_FUNC:
        switch ((FuncId)callee.func) {
        case FUNC_RANGE:
            return call_range(r, a);
        case FUNC_DICT:
            return v_dict(build_dict(r, "dict", a));
        case FUNC_NAMESPACE:
            return (Value){.kind = V_NAMESPACE, .dict = build_dict(r, "namespace", a)};
        case FUNC_RAISE_EXCEPTION: {
            static const char *const params[] = {"message", NULL};
            Value arg[1];
            bind_args(r, "raise_exception", a, params, arg);
            if (!given(arg[0]))
                raise_error(&r->c, "raise_exception() missing 1 required positional argument: 'message'");
            Str msg = to_str(r, arg[0]).s;
            raise_error(&r->c, "%.*s", (int)(msg.n < MAX_ERROR_TEXT ? msg.n : MAX_ERROR_TEXT), msg.p);
        }
        case FUNC_STRFTIME_NOW:
            return call_strftime(r, a);
        }
        break;
    case V_LOOP: {
        Loop *l = callee.loop;
        if (!l->node->op) raise_error(&r->c, "The loop must have the 'recursive' marker to be called recursively.");
        if (a->n_pos != 1 || a->n_kw) raise_error(&r->c, "loop() takes exactly one argument");
        enter_depth(r);
        int line = r->c.line;
        size_t start = capture_begin(r);
        run_for(r, l->node, l->scope, a->pos[0], l->depth0 + 1);
        Value out = capture_end(r, start);
        r->c.line = line;
        r->depth--;
        return out;
    }
    default:
        break;
    }
    raise_error(&r->c, "'%s' object is not callable", type_name(callee));
}

/* ---- expressions ---- */

/* Evaluates a node's arguments (list and kw). */
static void eval_args(Render *r, const Node *n, Scope *s, Args *a) {
    a->n_pos = n->list.n;
    a->n_kw = n->kw.n;
    a->pos = a->n_pos ? alloc_array(&r->c, a->n_pos, sizeof(Value)) : NULL;
    a->kw = a->n_kw ? alloc_array(&r->c, a->n_kw, sizeof(Value)) : NULL;
    int *names = a->n_kw ? alloc_array(&r->c, a->n_kw, sizeof(int)) : NULL;
    for (size_t i = 0; i < a->n_pos; i++) a->pos[i] = eval(r, n->list.at[i], s);
    for (size_t k = 0; k < a->n_kw; k++) {
        names[k] = n->kw.at[k]->name;
        a->kw[k] = eval(r, n->kw.at[k]->a, s);
    }
    a->kw_names = names;
}

static Value eval_list(Render *r, const Node *n, Scope *s, SeqType type) {
    List *l = new_list(&r->c, type, n->list.n);
    for (size_t i = 0; i < n->list.n; i++) l->items[i] = eval(r, n->list.at[i], s);
    return v_list(l);
}

static Value eval_inner(Render *r, const Node *n, Scope *s) {
    Args a;
    switch (n->type) {
    case N_CONST:
        return n->value;
    case N_NAME:
        if (r->folding) raise_error(&r->c, "not a constant");
        return lookup(r, s, n->name);
    case N_GETATTR:
        return get_attr(r, eval(r, n->a, s), n->value.s, n->op);
    case N_GETITEM: {
        Value obj = eval(r, n->a, s);
        const Node *k = n->b;
        if (k->type == N_SLICE) {
            Value parts[3];
            const Node *ends[3] = {k->a, k->b, k->c};
            for (int i = 0; i < 3; i++) parts[i] = ends[i] ? eval(r, ends[i], s) : v_missing();
            return get_slice(r, obj, parts[0], parts[1], parts[2], r->folding);
        }
        return get_item(r, obj, eval(r, k, s));
    }
    case N_CALL: {
        if (r->folding) raise_error(&r->c, "not a constant");
        const Node *callee = n->a;
        if (callee->type == N_GETATTR) {
            /* obj.method(...) without making a bound method */
            Value obj = eval(r, callee->a, s), out;
            if (obj.kind != V_DICT && obj.kind != V_NAMESPACE && obj.kind != V_UNDEFINED && obj.kind != V_LOOP &&
                callee->op >= 0 && (methods[callee->op].on & method_owner(obj)) &&
                !(methods[callee->op].unsafe & method_owner(obj))) {
                eval_args(r, n, s, &a);
                return call_method(r, obj, callee->op, &a);
            }
            Value f = get_attr(r, obj, callee->value.s, callee->op);
            eval_args(r, n, s, &a);
            (void)out;
            return call_value(r, f, &a);
        }
        Value f = eval(r, callee, s);
        eval_args(r, n, s, &a);
        return call_value(r, f, &a);
    }
    case N_FILTER: {
        if (r->folding && !is_literal_filter(n)) raise_error(&r->c, "not a constant");
        Value v = eval(r, n->a, s);
        eval_args(r, n, s, &a);
        return apply_filter_id(r, n->op, n->value.s, v, &a);
    }
    case N_TEST: {
        Value v = eval(r, n->a, s);
        eval_args(r, n, s, &a);
        return v_bool(apply_test_id(r, n->op, n->value.s, v, &a));
    }
    case N_NOT:
        return v_bool(!truthy(eval(r, n->a, s)));
    case N_NEG:
    case N_POS:
        return negate(r, eval(r, n->a, s), n->type == N_NEG);
    case N_AND: {
        Value left = eval(r, n->a, s);
        return truthy(left) ? eval(r, n->b, s) : left;
    }
    case N_OR: {
        Value left = eval(r, n->a, s);
        return truthy(left) ? left : eval(r, n->b, s);
    }
    case N_BINOP: {
        Value left = eval(r, n->a, s);
        return arith(r, (OpId)n->op, left, eval(r, n->b, s));
    }
    case N_COMPARE: {
        Value left = eval(r, n->a, s);
        for (size_t i = 0; i < n->list.n; i++) {
            const Node *operand = n->list.at[i];
            Value right = eval(r, operand->a, s);
            if (!compare(r, (CmpOp)operand->op, left, right)) return v_bool(false);
            left = right;
        }
        return v_bool(true);
    }
    case N_CONCAT: {
        Buf b = {.c = &r->c};
        for (size_t i = 0; i < n->list.n; i++) buf_addstr(&b, to_str(r, eval(r, n->list.at[i], s)).s);
        return buf_value(&b);
    }
    case N_CONDEXPR:
        if (truthy(eval(r, n->a, s))) return eval(r, n->b, s);
        if (n->c) return eval(r, n->c, s);
        char hint[128];
        snprintf(hint, sizeof hint,
                 "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
        return undefined_hint(&r->c, new_str(&r->c, hint, strlen(hint)).s.p);
    case N_LIST:
        return eval_list(r, n, s, SEQ_LIST);
    case N_TUPLE:
        return eval_list(r, n, s, SEQ_TUPLE);
    case N_DICT: {
        Dict *d = new_dict(&r->c, n->list.n);
        for (size_t i = 0; i < n->list.n; i++) {
            Value key = eval(r, n->list.at[i]->a, s);
            dict_set(&r->c, d, key, eval(r, n->list.at[i]->b, s));
        }
        return v_dict(d);
    }
    default:
        raise_error(&r->c, "cannot evaluate this expression");
    }
}

/* Whether jinja2 can keep a value as a constant of the compiled template. */
static bool representable(Value v) {
    switch (v.kind) {
    case V_NONE:
    case V_BOOL:
    case V_INT:
    case V_FLOAT:
    case V_STR:
        return true;
    case V_LIST:
        if (v.list->type > SEQ_RANGE) return false;
        for (size_t i = 0; i < v.list->len; i++)
            if (!representable(v.list->items[i])) return false;
        return true;
    case V_DICT:
        for (size_t i = 0; i < v.dict->len; i++)
            if (!representable(v.dict->keys[i]) || !representable(v.dict->vals[i])) return false;
        return true;
    default:
        return false;
    }
}

/* jinja2 evaluates every expression it can when it compiles a template:
 * as far as the evaluation gets without a variable, a call or a filter
 * that needs the context (so `'a' or x` and `1 if c else x` can be
 * constant). If that works and gives a constant (or anything, for a whole
 * {{ }}), the value is kept; otherwise the expression runs as any other.
 * The two differ only where a slice fails: evaluated early it is looked up
 * as an item, undefined rather than an error. So this is done for the
 * expressions that hold a slice (mark_foldable). */
static Value eval_constant(Render *r, const Node *n, Scope *s) {
    jmp_buf trap, *outer = r->c.unwind;
    int depth = r->depth, line = r->c.line;
    r->c.unwind = &trap;
    r->folding = true;
    if (setjmp(trap) == 0) {
        Value v = eval_inner(r, n, s);
        r->c.unwind = outer;
        r->folding = false;
        if (n->print_root || representable(v)) return v;
    }
    r->c.unwind = outer;
    r->folding = false;
    r->depth = depth;
    r->c.line = line;
    return eval_inner(r, n, s);
}

static Value eval(Render *r, const Node *n, Scope *s) {
    enter_depth(r);
    Value v = n->constant && !r->folding ? eval_constant(r, n, s) : eval_inner(r, n, s);
    r->depth--;
    return v;
}

/* ---- statements ---- */

/* Binds target (a name, or a tuple of targets to unpack into) to v. */
static void assign(Render *r, const Node *target, Value v, Scope *s) {
    if (target->type == N_NAME) {
        scope_set(r, s, target->name, v);
        return;
    }
    size_t n, want = target->list.n;
    if (v.kind != V_STR && v.kind != V_LIST && v.kind != V_DICT && v.kind != V_ITER && v.kind != V_UNDEFINED)
        raise_error(&r->c, "cannot unpack non-iterable %s object", type_name(v));
    Value *items = iterate(r, v, &n);
    if (n < want) raise_error(&r->c, "not enough values to unpack (expected %zu, got %zu)", want, n);
    if (n > want) raise_error(&r->c, "too many values to unpack (expected %zu)", want);
    for (size_t i = 0; i < want; i++) assign(r, target->list.at[i], items[i], s);
}

static void output(Render *r, Str s) {
    if (s.n > TEMPLATE_MAX_OUTPUT - r->out.n)
        raise_error(&r->c, "the output would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    buf_addstr(&r->out, s);
}

/* Applies a filter chain whose innermost filter has no operand to v. */
static Value apply_filter_chain(Render *r, const Node *f, Value v, Scope *s) {
    if (!f) return v;
    Value inner = apply_filter_chain(r, f->a, v, s);
    Args a;
    eval_args(r, f, s, &a);
    return apply_filter_id(r, f->op, f->value.s, inner, &a);
}

static void run_for(Render *r, const Node *n, Scope *s, Value iterable, int depth0) {
    size_t n_raw;
    Value *raw = iterate(r, iterable, &n_raw);
    Loop *l = alloc(&r->c, sizeof *l);
    *l = (Loop){.node = n, .scope = s, .raw = raw, .n_raw = n_raw, .depth0 = depth0, .changed_last = v_missing()};
    if (n->c) l->items = new_list(&r->c, SEQ_LIST, 0);
    else {
        /* no filter: the items are the iterable's, all known */
        l->items = alloc(&r->c, sizeof *l->items);
        *l->items = (List){.len = n_raw, .cap = n_raw, .type = SEQ_LIST, .items = raw};
        l->raw_pos = n_raw;
        l->all_known = true;
    }
    Value loop = {.kind = V_LOOP, .loop = l};
    Scope *body = new_scope(r, s);
    bool completed = false; /* an iteration ran its body to the end */
    for (size_t i = 0;; i++) {
        r->c.line = n->line;
        loop_fill(r, l, i + 1);
        if (i >= l->items->len) break;
        if (!n->c) count_iteration(&r->c);
        l->index0 = i;
        body->n = 0; /* each iteration starts with the loop's variables only */
        declare_locals(r, body, n->locals, n->n_locals);
        assign(r, n->a, l->items->items[i], body);
        scope_set(r, body, NAME_LOOP, loop);
        Flow f = exec_body(r, n->list, body);
        if (f == FLOW_BREAK) break;
        completed |= f == FLOW_NORMAL;
    }
    /* jinja2 runs the else block unless an iteration got to the end of the
     * body: after no items, and also when each ended with break or continue */
    if (!completed && n->d) exec_body(r, n->d->list, new_frame(r, s, n->d));
}

static Flow exec(Render *r, const Node *n, Scope *s) {
    r->c.line = n->line;
    switch (n->type) {
    case N_TEXT:
        output(r, n->value.s);
        break;
    case N_PRINT: {
        Value v = eval(r, n->a, s);
        if (v.kind == V_STR) output(r, v.s);
        else if (v.kind != V_UNDEFINED) write_value(r, &r->out, v, false, 0);
        break;
    }
    case N_IF:
        for (const Node *branch = n; branch;) {
            if (branch->type == N_BODY) return exec_body(r, branch->list, s);
            r->c.line = branch->line;
            if (truthy(eval(r, branch->a, s))) return exec_body(r, branch->list, s);
            branch = branch->b;
        }
        break;
    case N_FOR:
        run_for(r, n, s, eval(r, n->b, s), 0);
        break;
    case N_SET: {
        Value v = eval(r, n->b, s);
        if (n->a->type == N_NSREF) {
            Value ns = lookup(r, s, n->a->name);
            if (ns.kind != V_NAMESPACE) raise_error(&r->c, "cannot assign attribute on non-namespace object");
            dict_set(&r->c, ns.dict, n->a->value, v);
        } else assign(r, n->a, v, s);
        break;
    }
    case N_SETBLOCK: {
        size_t start = capture_begin(r);
        enter_depth(r);
        Flow f = exec_body(r, n->list, new_frame(r, s, n));
        r->depth--;
        if (f != FLOW_NORMAL) {
            /* break or continue leaves the loop at once: nothing is set */
            r->out.n = start;
            return f;
        }
        r->c.line = n->line;
        Value v = apply_filter_chain(r, n->b, capture_end(r, start), s);
        if (n->a->type == N_NSREF) {
            Value ns = lookup(r, s, n->a->name);
            if (ns.kind != V_NAMESPACE) raise_error(&r->c, "cannot assign attribute on non-namespace object");
            dict_set(&r->c, ns.dict, n->a->value, v);
        } else assign(r, n->a, v, s);
        break;
    }
    case N_MACRO: {
        Macro *m = alloc(&r->c, sizeof *m);
        *m = (Macro){.node = n, .closure = s};
        scope_set(r, s, n->name, (Value){.kind = V_MACRO, .macro = m});
        break;
    }
    case N_BREAK:
        return FLOW_BREAK;
    case N_CONTINUE:
        return FLOW_CONTINUE;
    case N_WITH: {
        Scope *inner = new_frame(r, s, n);
        for (size_t i = 0; i < n->kw.n; i++) assign(r, n->kw.at[i]->a, eval(r, n->kw.at[i]->b, s), inner);
        return exec_body(r, n->list, inner);
    }
    case N_FILTERBLOCK: {
        size_t start = capture_begin(r);
        enter_depth(r);
        Flow f = exec_body(r, n->list, new_frame(r, s, n));
        r->depth--;
        if (f != FLOW_NORMAL) {
            r->out.n = start;
            return f;
        }
        r->c.line = n->line;
        Value v = apply_filter_chain(r, n->b, capture_end(r, start), s);
        output(r, to_str(r, v).s);
        break;
    }
    case N_BODY:
        return exec_body(r, n->list, s);
    default:
        raise_error(&r->c, "cannot run this statement");
    }
    return FLOW_NORMAL;
}

static Flow exec_body(Render *r, Nodes body, Scope *s) {
    enter_depth(r);
    for (size_t i = 0; i < body.n; i++) {
        Flow f = exec(r, body.at[i], s);
        if (f != FLOW_NORMAL) {
            r->depth--;
            return f;
        }
    }
    r->depth--;
    return FLOW_NORMAL;
}

/* ---- values from JSON ---- */

/* A JSON value as the Python object json.loads gives (a repeated key
 * keeps its first place and its last value, as in a Python dict). */
static Value from_json(Render *r, const JsonValue *j) {
    switch (j->type) {
    case JSON_NULL:
        return v_none();
    case JSON_BOOL:
        return v_bool(j->boolean);
    case JSON_NUMBER:
        return j->number.is_integer ? v_int(j->number.integer) : v_float(j->number.value);
    case JSON_STRING:
        return v_str(j->string, j->len);
    case JSON_ARRAY: {
        List *l = new_list(&r->c, SEQ_LIST, j->len);
        for (size_t i = 0; i < j->len; i++) l->items[i] = from_json(r, &j->items[i]);
        return v_list(l);
    }
    case JSON_OBJECT: {
        Dict *d = new_dict(&r->c, j->len);
        for (size_t i = 0; i < j->len; i++)
            dict_set(&r->c, d, v_str(j->members[i].key, j->members[i].key_len), from_json(r, &j->members[i].value));
        return v_dict(d);
    }
    }
    return v_none();
}

/* ======================================================================
 * The public functions
 * ====================================================================== */

void template_free(Template *t) {
    if (t) arena_free(t->chunks);
}

Template *template_parse(const char *text, size_t len, Error *e) {
    if (len > TEMPLATE_MAX_TEXT) {
        fail(e, "the template is larger than %zu KiB", TEMPLATE_MAX_TEXT >> 10);
        return NULL;
    }
    uint32_t c;
    bool truncated;
    for (size_t i = 0; i < len;) {
        size_t used = (unsigned char)text[i] < 0x80 ? 1 : utf8_next(text + i, len - i, &c, &truncated);
        if (used > 1 || (unsigned char)text[i] < 0x80) {
            if ((unsigned char)text[i] >= 0x80 && c == UTF8_INVALID) used = 0;
        }
        if (used == 0 || ((unsigned char)text[i] >= 0x80 && c == UTF8_INVALID)) {
            fail(e, "the template is not valid UTF-8 (byte %zu)", i);
            return NULL;
        }
        i += used;
    }
    jmp_buf unwind;
    Parser p = {.c = {.unwind = &unwind, .e = e, .line = 1, .limit = SIZE_MAX / 4}, .line = 1};
    Parser *volatile pp = &p;
    if (setjmp(unwind)) {
        arena_free(pp->c.chunks);
        return NULL;
    }
    Template *t = alloc(&p.c, sizeof *t);
    *t = (Template){0};
    p.t = t;
    for (int i = 0; i < N_PREDEFINED_NAMES; i++) intern(&p.c, t, str_c(predefined_names[i]));
    /* Newlines become \n, and one newline at the very end is dropped
     * (jinja2's keep_trailing_newline=False). */
    char *src = alloc(&p.c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else src[n++] = text[i];
    }
    if (n > 0 && src[n - 1] == '\n') n--;
    src[n] = '\0';
    p.src = src;
    p.len = n;
    lex(&p);
    p.pos = 0;
    p.depth = 0;
    t->body = subparse(&p, NULL);
    if (p.unknown[0]) raise_at(&p.c, p.unknown_line, "%s", p.unknown);
    analyse_frame(&p, NULL, NULL, NULL, false, t->body, &t->locals, &t->n_locals);
    for (size_t i = 0; i < t->body.n; i++) mark_foldable(t->body.at[i]);
    t->chunks = p.c.chunks;
    return t;
}

char *template_render(const Template *t, const JsonValue *vars, const struct tm *now, size_t *out_len, Error *e) {
    if (!vars || vars->type != JSON_OBJECT) {
        fail(e, "template variables must be a JSON object");
        return NULL;
    }
    jmp_buf unwind;
    Render r = {.c = {.unwind = &unwind, .e = e, .line = 1, .limit = TEMPLATE_MAX_MEMORY}, .t = t};
    Render *volatile rp = &r;
    if (setjmp(unwind)) {
        arena_free(rp->c.chunks);
        return NULL;
    }
    r.out.c = &r.c;
    if (now) r.now = *now;
    else {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        time_t secs = tv.tv_sec;
        localtime_r(&secs, &r.now);
        r.microseconds = (long)tv.tv_usec;
    }
    /* The variables the template names (the others cannot be reached), under
     * the template's own frame. */
    Scope *context = new_scope(&r, NULL);
    for (size_t i = 0; i < vars->len; i++) {
        const JsonMember *m = &vars->members[i];
        int id = find_name(t, (Str){m->key, m->key_len});
        if (id >= 0) scope_set(&r, context, id, from_json(&r, &m->value));
    }
    Scope *root = new_scope(&r, context);
    declare_locals(&r, root, t->locals, t->n_locals);
    exec_body(&r, t->body, root);
    char *text = xmalloc(r.out.n + 1);
    if (r.out.n) memcpy(text, r.out.p, r.out.n);
    text[r.out.n] = '\0';
    *out_len = r.out.n;
    arena_free(r.c.chunks);
    return text;
}
