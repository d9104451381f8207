/* jinja/value.c - the ground floor of the Jinja engine: the arena every
 * parse and render allocates from, and the error that unwinds it; strings
 * and UTF-8 (Python's isspace, isprintable and case mapping); values and
 * dicts; Python's == and < on them, and the names of their types. */
#include "jinja.h"

/* ======================================================================
 * Errors and the arena
 * ====================================================================== */

/* Fills the error as "template line N: <message>" (one line of valid UTF-8)
 * and unwinds to the public function that is running. */
noreturn void raise_at(Ctx *c, int line, const char *fmt, ...) {
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

void arena_free(Chunk *k) {
    while (k) {
        Chunk *next = k->next;
        free(k);
        k = next;
    }
}

void *alloc(Ctx *c, size_t size) {
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
bool grow_last(Ctx *c, const void *p, size_t len, size_t new_len) {
    Chunk *k = c->chunks;
    if (!k || p != c->last || len != c->last_len || new_len > c->limit) return false;
    size_t old_size = (len + 15) & ~(size_t)15, new_size = (new_len + 15) & ~(size_t)15;
    if (new_size - old_size > k->size - k->used) return false;
    k->used += new_size - old_size;
    c->last_len = new_len;
    return true;
}

/* One more iteration of the budget of TEMPLATE_MAX_ITERATIONS. */
void count_iteration(Ctx *c) {
    if (++c->iterations > TEMPLATE_MAX_ITERATIONS)
        raise_error(c, "the template ran more than %d loop iterations", TEMPLATE_MAX_ITERATIONS);
}

/* An array of n elements of size bytes, with the product checked. */
void *alloc_array(Ctx *c, size_t n, size_t size) {
    size_t total;
    if (mul_size(n, size, &total) != 0) raise_error(c, "the template needs too much memory");
    return alloc(c, total);
}

/* ======================================================================
 * Strings and UTF-8
 * ====================================================================== */

/* The character at s[0..n) (n >= 1) and its length in bytes; text is valid
 * UTF-8 everywhere in a render, but a stray byte reads as U+FFFD. */
uint32_t next_char(const char *s, size_t n, size_t *used) {
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
size_t prev_char_start(const char *s, size_t n) {
    size_t k = n - 1;
    while (k > 0 && is_continuation((unsigned char)s[k])) k--;
    return k;
}

size_t count_chars(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += !is_continuation((unsigned char)s[i]);
    return count;
}

/* Python's str.isspace(): the characters Python's split() and strip() and
 * the \s of jinja2's lexer treat as white space. */
bool py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Python's str.isprintable() for one character, which decides what repr()
 * escapes. Exact for ASCII and Latin-1; above that the control, format,
 * separator, surrogate and private-use characters are known, and every
 * other character counts as printable (unassigned ones are the difference). */
bool py_isprintable(uint32_t c) {
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
uint32_t char_upper(uint32_t c) {
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

uint32_t char_lower(uint32_t c) {
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
bool char_is_cased(uint32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    return char_upper(c) != c || char_lower(c) != c || (unicode_class(c) & UNICODE_LETTER);
}

bool char_is_upper(uint32_t c) { return char_lower(c) != c; }
bool char_is_lower(uint32_t c) { return char_upper(c) != c || c == 0xDF; }

/* ======================================================================
 * Values
 * ====================================================================== */

Value new_str(Ctx *c, const char *p, size_t n) {
    if (n > TEMPLATE_MAX_OUTPUT) raise_error(c, "a string would be longer than %zu MiB", TEMPLATE_MAX_OUTPUT >> 20);
    char *q = alloc(c, n + 1);
    if (n) memcpy(q, p, n);
    q[n] = '\0';
    return v_str(q, n);
}

List *new_list(Ctx *c, SeqType type, size_t len) {
    List *l = alloc(c, sizeof *l);
    *l = (List){.len = len, .cap = len, .type = type, .items = len ? alloc_array(c, len, sizeof(Value)) : NULL};
    return l;
}

Value new_tuple2(Ctx *c, Value a, Value b) {
    List *l = new_list(c, SEQ_TUPLE, 2);
    l->items[0] = a;
    l->items[1] = b;
    return v_list(l);
}

void list_push(Ctx *c, List *l, Value v) {
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Value *items = alloc_array(c, cap, sizeof(Value));
        if (l->len) memcpy(items, l->items, l->len * sizeof(Value));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = v;
}

Value undefined_named(Ctx *c, Str name) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.obj = v_missing(), .name = v_str(name.p, name.n)};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

Value undefined_hint(Ctx *c, const char *hint) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.hint = hint, .obj = v_missing(), .name = v_none()};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

/* What obj[name] or obj.name gives when obj has no such item. */
Value undefined_member(Ctx *c, Value obj, Value name) {
    Undef *u = alloc(c, sizeof *u);
    *u = (Undef){.obj = obj, .name = name};
    return (Value){.kind = V_UNDEFINED, .undef = u};
}

/* ---- dicts ---- */

enum { DICT_LINEAR_MAX = 8 }; /* dicts up to this size are searched without an index */

Dict *new_dict(Ctx *c, size_t cap) {
    Dict *d = alloc(c, sizeof *d);
    *d = (Dict){.cap = cap};
    if (cap) {
        d->keys = alloc_array(c, cap, sizeof(Value));
        d->vals = alloc_array(c, cap, sizeof(Value));
    }
    return d;
}

uint64_t hash_bytes(const char *p, size_t n) {
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

Value *dict_get(Ctx *c, const Dict *d, Value key) {
    ptrdiff_t i = dict_slot(c, d, key);
    return i < 0 ? NULL : &d->vals[i];
}

Value *dict_get_str(Ctx *c, const Dict *d, Str key) { return dict_get(c, d, v_str(key.p, key.n)); }

/* d[key] = val: a new key goes last, an existing one keeps its place. */
void dict_set(Ctx *c, Dict *d, Value key, Value val) {
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

bool py_equal(Ctx *c, Value a, Value b) { return equal_at(c, a, b, 0); }

static const char *const cmp_symbols[] = {"==", "!=", "<", "<=", ">", ">=", "in", "not in"};

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

bool py_order(Ctx *c, CmpOp op, Value a, Value b) { return order_at(c, op, a, b, 0); }

/* ---- names of types ---- */

const char *const seq_type_names[] = {"list", "tuple", "range", "dict_items", "dict_keys", "dict_values"};

/* Python's type(v).__name__. */
const char *type_name(Value v) {
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
void object_type_repr(char *out, size_t size, Value v) {
    if (v.kind == V_NONE) snprintf(out, size, "None");
    else if (v.kind == V_NAMESPACE) snprintf(out, size, "jinja2.utils.Namespace object");
    else if (v.kind == V_LOOP) snprintf(out, size, "jinja2.runtime.LoopContext object");
    else if (v.kind == V_MACRO) snprintf(out, size, "jinja2.runtime.Macro object");
    else if (v.kind == V_STR && v.markup) snprintf(out, size, "markupsafe.Markup object");
    else snprintf(out, size, "%s object", type_name(v));
}
