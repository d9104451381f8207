/* schema.c - JSON Schema to GBNF: each schema becomes a rule (named r1, r2,
 * ...; a $ref target once, so recursion works), written after the rules it
 * uses; the JSON basics (value, string, number, ws, ...) close the grammar. */
#include "schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---- text buffers ---- */

typedef struct {
    char *p;
    size_t n, cap;
} Text;

static void put(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)need + 1 > t->cap) {
        t->cap = 2 * (t->n + (size_t)need + 1);
        t->p = xrealloc(t->p, t->cap, 1);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->n, (size_t)need + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)need;
}

/* ---- the generator ---- */

typedef struct {
    const JsonValue *node;
    int rule;
} RefRule;

typedef struct {
    const JsonValue *root;
    const char *prefix;  /* of the rules' names: <prefix>1, <prefix>2, ... */
    Text rules;          /* the finished rules */
    int n_rules;
    RefRule *refs;       /* $ref targets given a rule already */
    int n_refs;
    char path[256];      /* where in the schema we are, for messages */
    int depth;
    Error *e;
} Gen;

static int gen_fail(Gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gen_fail(Gen *g, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(g->e, "schema at %s: %s", g->path[0] ? g->path : "/", msg);
}

static int gen_schema(Gen *g, const JsonValue *s, int rule);

/* A fresh rule number. */
static int new_rule(Gen *g) { return ++g->n_rules; }

/* Adds "rN ::= body" to the grammar. */
static int add_rule(Gen *g, int rule, const Text *body) {
    put(&g->rules, "%s%d ::= %s\n", g->prefix, rule, body->n ? body->p : "\"\"");
    if (g->rules.n > SCHEMA_MAX_GRAMMAR) return gen_fail(g, "the schema makes too large a grammar (over %d bytes)", SCHEMA_MAX_GRAMMAR);
    return 0;
}

/* The rule of subschema s, found at path suffix `where`. */
static int sub_rule(Gen *g, const JsonValue *s, const char *where, int *rule) {
    size_t at = strlen(g->path);
    snprintf(g->path + at, sizeof g->path - at, "%s", where);
    if (++g->depth > SCHEMA_MAX_DEPTH) return gen_fail(g, "schemas nest deeper than %d", SCHEMA_MAX_DEPTH);
    *rule = new_rule(g);
    int rc = gen_schema(g, s, *rule);
    g->depth--;
    g->path[at] = '\0';
    return rc;
}

/* ---- literals ---- */

/* Writes bytes s[0..n) into a GBNF literal body (inside the quotes). */
static void put_gbnf_chars(Text *t, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') put(t, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) put(t, "\\x%02X", c);
        else put(t, "%c", c);
    }
}

/* Writes the JSON text of string s[0..n) (quotes and escapes as JSON wants
 * them) as GBNF literal characters. */
static void put_json_string(Text *t, const char *s, size_t n) {
    put(t, "\\\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') put(t, "\\\\\\\"");
        else if (c == '\\') put(t, "\\\\\\\\");
        else if (c == '\n') put(t, "\\\\n");
        else if (c == '\t') put(t, "\\\\t");
        else if (c == '\r') put(t, "\\\\r");
        else if (c == '\b') put(t, "\\\\b");
        else if (c == '\f') put(t, "\\\\f");
        else if (c < 0x20) put(t, "\\\\u%04x", c);
        else put_gbnf_chars(t, s + i, 1);
    }
    put(t, "\\\"");
}

/* Writes x as a GBNF literal the way Python's repr writes it: the fewest
 * digits that read back as x, and ".0" on a whole number. */
static void put_double(Text *t, double x) {
    char s[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, x);
        if (strtod(s, NULL) == x) break;
    }
    put(t, "\"%s%s\"", s, strpbrk(s, ".e") ? "" : ".0");
}

/* Writes value v as GBNF: its JSON text, with room for whitespace between
 * the tokens of an array or object. */
static void put_json_value(Text *t, const JsonValue *v) {
    switch (v->type) {
    case JSON_NULL: put(t, "\"null\""); break;
    case JSON_BOOL: put(t, v->boolean ? "\"true\"" : "\"false\""); break;
    case JSON_NUMBER:
        if (v->number.is_integer) put(t, "\"%lld\"", (long long)v->number.integer);
        else put_double(t, v->number.value);
        break;
    case JSON_STRING:
        put(t, "\"");
        put_json_string(t, v->string, v->len);
        put(t, "\"");
        break;
    case JSON_ARRAY:
        put(t, "\"[\" ws ");
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(t, "\",\" ws ");
            put_json_value(t, &v->items[i]);
            put(t, " ws ");
        }
        put(t, "\"]\"");
        break;
    case JSON_OBJECT:
        put(t, "\"{\" ws ");
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(t, "\",\" ws ");
            put(t, "\"");
            put_json_string(t, v->members[i].key, v->members[i].key_len);
            put(t, "\" ws \":\" ws ");
            put_json_value(t, &v->members[i].value);
            put(t, " ws ");
        }
        put(t, "\"}\"");
        break;
    }
}

/* A number written with %.17g could be inf or nan: JSON has neither. */
static bool literal_ok(const JsonValue *v) {
    if (v->type == JSON_NUMBER) return isfinite(v->number.value);
    if (v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->len; i++)
            if (!literal_ok(&v->items[i])) return false;
    if (v->type == JSON_OBJECT)
        for (size_t i = 0; i < v->len; i++)
            if (!literal_ok(&v->members[i].value)) return false;
    return true;
}

/* ---- integers and numbers in a range ---- */

/* Digits of [x, y], both of exactly len digits (x <= y, as strings). */
static void put_digit_range(Text *t, const char *x, const char *y, int len) {
    if (len == 0) return;
    if (x[0] == y[0]) {
        put(t, "\"%c\" ", x[0]);
        put_digit_range(t, x + 1, y + 1, len - 1);
        return;
    }
    bool x_rest_zero = true, y_rest_nine = true;
    for (int i = 1; i < len; i++) x_rest_zero &= x[i] == '0', y_rest_nine &= y[i] == '9';
    if (x_rest_zero && y_rest_nine) {
        put(t, "[%c-%c]", x[0], y[0]);
        if (len > 1) put(t, " [0-9]{%d}", len - 1);
        put(t, " ");
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', (size_t)len);
    memset(zeros, '0', (size_t)len);
    put(t, "(\"%c\" ", x[0]);
    put_digit_range(t, x + 1, nines, len - 1);
    if (x[0] + 1 <= y[0] - 1) {
        put(t, "| [%c-%c]", x[0] + 1, y[0] - 1);
        if (len > 1) put(t, " [0-9]{%d}", len - 1);
        put(t, " ");
    }
    put(t, "| \"%c\" ", y[0]);
    put_digit_range(t, zeros + 1, y + 1, len - 1);
    put(t, ") ");
}

enum { MAX_DIGITS = 16 };  /* digits of an unbounded integer part */
#define BOUND_LIMIT 1e15   /* bounds must be within +-BOUND_LIMIT */

/* An alternative (with a leading "| " unless first) for the non-negative
 * integers [lo, hi] written without leading zeros; hi < 0: no upper bound. */
static void put_natural_range(Text *t, long long lo, long long hi, bool *first) {
    if (hi >= 0 && hi < lo) return;
    if (lo == 0) {
        put(t, "%s\"0\" ", *first ? "" : "| ");
        *first = false;
        lo = 1;
        if (hi == 0) return;
    }
    char a[24], b[24];
    int la = snprintf(a, sizeof a, "%lld", lo);
    int lb = hi >= 0 ? snprintf(b, sizeof b, "%lld", hi) : MAX_DIGITS;
    for (int len = la; len <= lb; len++) {
        char x[24], y[24];
        if (len == la) memcpy(x, a, (size_t)len + 1);
        else x[0] = '1', memset(x + 1, '0', (size_t)len - 1), x[len] = '\0';
        if (hi >= 0 && len == lb) memcpy(y, b, (size_t)len + 1);
        else memset(y, '9', (size_t)len), y[len] = '\0';
        put(t, "%s", *first ? "" : "| ");
        *first = false;
        put_digit_range(t, x, y, len);
    }
}

/* The integers in [lo, hi]; has_lo/has_hi false: unbounded that way. */
static int put_integer_range(Gen *g, Text *t, bool has_lo, long long lo, bool has_hi, long long hi) {
    if (has_lo && has_hi && lo > hi) return gen_fail(g, "no integer lies between the minimum and the maximum");
    bool first = true;
    put(t, "(");
    /* Negatives: "-" then magnitudes in [max(1, -hi), -lo]. */
    if (!has_lo || lo < 0) {
        long long m_lo = has_hi && hi < 0 ? -hi : 1, m_hi = has_lo ? -lo : -1;
        put(t, "\"-\" (");
        bool inner = true;
        put_natural_range(t, m_lo, m_hi, &inner);
        put(t, ") ");
        first = false;
    }
    if (!has_hi || hi >= 0) put_natural_range(t, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1, &first);
    put(t, ")");
    return 0;
}

/* Magnitudes I.f in [a, b] (b < 0: unbounded), a and b integers: the
 * integer part below b with any fraction, or b with a zero fraction. */
static void put_magnitude_range(Text *t, long long a, long long b, bool *first) {
    if (b >= 0 && b < a) return;
    put(t, "%s(", *first ? "" : "| ");
    *first = false;
    bool inner = true;
    if (b < 0 || b > a) {
        put(t, "(");
        put_natural_range(t, a, b < 0 ? -1 : b - 1, &inner);
        put(t, ") frac? ");
    }
    if (b >= 0) put(t, "%s\"%lld\" zero-frac? ", inner ? "" : "| ", b);
    put(t, ") ");
}

static int put_number_range(Gen *g, Text *t, bool has_lo, long long lo, bool has_hi, long long hi) {
    if (has_lo && has_hi && lo > hi) return gen_fail(g, "no number lies between the minimum and the maximum");
    bool first = true;
    put(t, "(");
    if (!has_lo || lo < 0) {
        /* x = -M < 0 with lo <= x <= hi: M in [max(-hi, 0), -lo]. */
        put(t, "\"-\" (");
        bool inner = true;
        put_magnitude_range(t, has_hi && hi < 0 ? -hi : 0, has_lo ? -lo : -1, &inner);
        put(t, ") ");
        first = false;
    }
    if (!has_hi || hi >= 0) put_magnitude_range(t, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1, &first);
    put(t, ")");
    return 0;
}

/* A bound keyword of s as an integer: ceil for a lower bound, floor for an
 * upper one, one further in for an exclusive bound; *has false if absent. */
static int read_bound(Gen *g, const JsonValue *s, const char *key, bool lower, bool exclusive, bool integral_only,
                      bool *has, long long *out) {
    const JsonValue *v = json_get(s, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER) return gen_fail(g, "'%s' must be a number", key);
    double x = v->number.value;
    if (!(fabs(x) <= BOUND_LIMIT)) return gen_fail(g, "'%s' beyond +-1e15 is not supported", key);
    if (integral_only && (x != floor(x) || exclusive))
        return gen_fail(g, "'%s' on a number is supported only as an inclusive integer bound", key);
    double r = lower ? (exclusive ? floor(x) + 1 : ceil(x)) : (exclusive ? ceil(x) - 1 : floor(x));
    long long b = (long long)r;
    if (*has) b = lower ? (b > *out ? b : *out) : (b < *out ? b : *out);
    *has = true;
    *out = b;
    return 0;
}

static int gen_number(Gen *g, const JsonValue *s, Text *body, bool integer) {
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    if (read_bound(g, s, "minimum", true, false, !integer, &has_lo, &lo) != 0 ||
        read_bound(g, s, "exclusiveMinimum", true, true, !integer, &has_lo, &lo) != 0 ||
        read_bound(g, s, "maximum", false, false, !integer, &has_hi, &hi) != 0 ||
        read_bound(g, s, "exclusiveMaximum", false, true, !integer, &has_hi, &hi) != 0)
        return -1;
    if (!has_lo && !has_hi) {
        put(body, integer ? "integer" : "number");
        return 0;
    }
    return integer ? put_integer_range(g, body, has_lo, lo, has_hi, hi) : put_number_range(g, body, has_lo, lo, has_hi, hi);
}

/* ---- strings: lengths, formats, patterns ---- */

static int read_count(Gen *g, const JsonValue *s, const char *key, int *out) {
    const JsonValue *v = json_get(s, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER || !v->number.is_integer || v->number.integer < 0)
        return gen_fail(g, "'%s' must be a non-negative integer", key);
    if (v->number.integer > 1000) return gen_fail(g, "'%s' above 1000 is not supported", key);
    *out = (int)v->number.integer;
    return 0;
}

/* Rules of the formats, each the RFC 3339 / RFC 4122 text. */
static const char *format_rule(const char *format) {
    if (strcmp(format, "date") == 0) return "date";
    if (strcmp(format, "time") == 0) return "time";
    if (strcmp(format, "date-time") == 0) return "date-time";
    if (strcmp(format, "uuid") == 0) return "uuid";
    return NULL;
}

static int gen_pattern(Gen *g, const char *re, size_t n, Text *body);

static int gen_string(Gen *g, const JsonValue *s, Text *body) {
    int min = 0, max = -1;
    if (read_count(g, s, "minLength", &min) != 0 || read_count(g, s, "maxLength", &max) != 0) return -1;
    if (max >= 0 && max < min) return gen_fail(g, "maxLength is below minLength");
    const JsonValue *format = json_get(s, "format"), *pattern = json_get(s, "pattern");
    bool lengths = json_get(s, "minLength") || json_get(s, "maxLength");
    if ((format != NULL) + (pattern != NULL) + lengths > 1)
        return gen_fail(g, "only one of format, pattern and minLength/maxLength is supported on a string");
    if (format) {
        const char *rule = format->type == JSON_STRING ? format_rule(format->string) : NULL;
        if (!rule) return gen_fail(g, "format %s%s%s is not supported (date, time, date-time and uuid are)",
                                   format->type == JSON_STRING ? "'" : "", format->type == JSON_STRING ? format->string : "(not a string)",
                                   format->type == JSON_STRING ? "'" : "");
        put(body, "\"\\\"\" %s \"\\\"\"", rule);
        return 0;
    }
    if (pattern) {
        if (pattern->type != JSON_STRING) return gen_fail(g, "'pattern' must be a string");
        put(body, "\"\\\"\" ");
        if (gen_pattern(g, pattern->string, pattern->len, body) != 0) return -1;
        put(body, " \"\\\"\"");
        return 0;
    }
    if (!lengths) put(body, "string");
    else if (max < 0) put(body, "\"\\\"\" char{%d,} \"\\\"\"", min);
    else put(body, "\"\\\"\" char{%d,%d} \"\\\"\"", min, max);
    return 0;
}

/* ---- patterns: a regular expression to GBNF over the JSON text ---- */

typedef struct {
    Gen *g;
    const char *s;
    size_t n, pos;
    int depth;
} Regex;

typedef struct {
    uint32_t lo, hi;
} CodeRange;

typedef struct {
    CodeRange r[64];
    int n;
    bool negate;
} ClassSet;

static int regex_fail(Regex *r, const char *what) {
    return gen_fail(r->g, "pattern at offset %zu: %s", r->pos, what);
}

static int class_add(Regex *r, ClassSet *c, uint32_t lo, uint32_t hi) {
    if (c->n == (int)(sizeof c->r / sizeof *c->r)) return regex_fail(r, "too many ranges in a class");
    c->r[c->n++] = (CodeRange){lo, hi};
    return 0;
}

/* Reads one UTF-8 character of the pattern. */
static int regex_char(Regex *r, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)r->s + r->pos;
    size_t left = r->n - r->pos;
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return regex_fail(r, "invalid UTF-8");
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) c = c << 6 | (s[i] & 0x3F);
    r->pos += (size_t)n;
    *cp = c;
    return 0;
}

/* \d \w \s (ASCII: Python's Unicode classes are larger, so the ASCII ones
 * are safe) and their negations (ASCII too, so as not to take in a
 * Unicode digit or letter the regex would call one). */
static int class_escape(Regex *r, ClassSet *c, int e, bool *done) {
    *done = true;
    switch (e) {
    case 'd': return class_add(r, c, '0', '9');
    case 'w': return class_add(r, c, '0', '9') | class_add(r, c, 'A', 'Z') | class_add(r, c, 'a', 'z') | class_add(r, c, '_', '_');
    case 's': return class_add(r, c, '\t', '\r') | class_add(r, c, ' ', ' ');
    case 'D': return class_add(r, c, 0, '0' - 1) | class_add(r, c, '9' + 1, 0x7F);
    case 'W':
        return class_add(r, c, 0, '0' - 1) | class_add(r, c, '9' + 1, 'A' - 1) | class_add(r, c, 'Z' + 1, '_' - 1) |
               class_add(r, c, '`', '`') | class_add(r, c, 'z' + 1, 0x7F);
    case 'S': return class_add(r, c, 0, '\t' - 1) | class_add(r, c, '\r' + 1, ' ' - 1) | class_add(r, c, ' ' + 1, 0x7F);
    }
    *done = false;
    return 0;
}

/* The character an escape stands for (after the backslash). */
static int escaped_char(Regex *r, uint32_t *cp) {
    if (r->pos >= r->n) return regex_fail(r, "ends with a backslash");
    char e = r->s[r->pos];
    if (strchr("nrtfv", e) && e) {
        r->pos++;
        *cp = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'f' ? '\f' : '\v';
        return 0;
    }
    if (e == 'u' || e == 'x') {
        int digits = e == 'u' ? 4 : 2;
        uint32_t v = 0;
        r->pos++;
        for (int i = 0; i < digits; i++, r->pos++) {
            char h = r->pos < r->n ? r->s[r->pos] : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return regex_fail(r, "bad hex escape");
            v = v << 4 | (uint32_t)d;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return regex_fail(r, "a surrogate escape is not supported");
        *cp = v;
        return 0;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
        return regex_fail(r, "this escape (a word boundary, back-reference or class) is not supported");
    return regex_char(r, cp);
}

/* Writes one character of the string as the JSON text may spell it: itself,
 * or its escape when JSON requires one. */
static void put_json_char(Text *t, uint32_t c) {
    if (c == '"') put(t, "\"\\\\\\\"\"");
    else if (c == '\\') put(t, "\"\\\\\\\\\"");
    else if (c < 0x20) {
        const char *named = c == '\n' ? "n" : c == '\t' ? "t" : c == '\r' ? "r" : c == '\b' ? "b" : c == '\f' ? "f" : NULL;
        if (named) put(t, "\"\\\\%s\"", named);
        else put(t, "\"\\\\u%04x\"", c);
    } else put(t, "[\\U%08X]", c);
}

/* Writes a class of characters: the plain ones as one GBNF class, and those
 * JSON must escape (quote, backslash, controls) each by its escape. */
static int put_class(Text *t, ClassSet *c) {
    /* Sort, merge, and negate over all of Unicode when asked. */
    for (int i = 1; i < c->n; i++)
        for (int j = i; j > 0 && c->r[j].lo < c->r[j - 1].lo; j--) {
            CodeRange x = c->r[j];
            c->r[j] = c->r[j - 1];
            c->r[j - 1] = x;
        }
    CodeRange merged[66];
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (m > 0 && c->r[i].lo <= merged[m - 1].hi + 1) {
            if (c->r[i].hi > merged[m - 1].hi) merged[m - 1].hi = c->r[i].hi;
        } else merged[m++] = c->r[i];
    }
    if (c->negate) {
        CodeRange neg[66];
        int k = 0;
        uint32_t next = 0;
        for (int i = 0; i < m; i++) {
            if (merged[i].lo > next) neg[k++] = (CodeRange){next, merged[i].lo - 1};
            next = merged[i].hi + 1;
        }
        if (next <= 0x10FFFF) neg[k++] = (CodeRange){next, 0x10FFFF};
        memcpy(merged, neg, (size_t)k * sizeof *neg);
        m = k;
    }
    Text plain = {0};
    bool any = false;
    put(t, "(");
    for (int i = 0; i < m; i++) {
        uint32_t lo = merged[i].lo, hi = merged[i].hi;
        /* The characters JSON escapes, one by one. */
        for (uint32_t x = lo; x <= hi && x < 0x20; x++) {
            put(t, "%s", any ? " | " : "");
            put_json_char(t, x);
            any = true;
        }
        if (lo <= '"' && hi >= '"') put(t, "%s", any ? " | " : ""), put_json_char(t, '"'), any = true;
        if (lo <= '\\' && hi >= '\\') put(t, "%s", any ? " | " : ""), put_json_char(t, '\\'), any = true;
        /* The rest as ranges, skipping the quote and the backslash (and
         * the surrogates, which have no UTF-8 form). */
        if (lo < 0x20) lo = 0x20;
        if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
        if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
        while (lo <= hi) {
            uint32_t end = hi;
            if (lo <= '"' && '"' <= end) end = lo == '"' ? '"' : '"' - 1;
            else if (lo <= '\\' && '\\' <= end) end = lo == '\\' ? '\\' : '\\' - 1;
            if (!(lo == end && (lo == '"' || lo == '\\'))) put(&plain, "\\U%08X-\\U%08X", lo, end);
            lo = end + 1;
            if (lo == 0) break;
        }
    }
    if (plain.n) put(t, "%s[%s]", any ? " | " : "", plain.p), any = true;
    if (!any) put(t, "[^\\x00-\\U0010FFFF]");  /* matches nothing */
    put(t, ")");
    free(plain.p);
    return 0;
}

static int regex_alternates(Regex *r, Text *t);

/* [...] in the pattern, the bracket read. */
static int regex_class(Regex *r, Text *t) {
    ClassSet c = {.n = 0};
    if (r->pos < r->n && r->s[r->pos] == '^') c.negate = true, r->pos++;
    bool first = true;
    for (;;) {
        if (r->pos >= r->n) return regex_fail(r, "unterminated class");
        if (r->s[r->pos] == ']' && !first) {
            r->pos++;
            break;
        }
        first = false;
        uint32_t lo;
        if (r->s[r->pos] == '\\') {
            r->pos++;
            bool done;
            if (r->pos < r->n && class_escape(r, &c, r->s[r->pos], &done) != 0) return -1;
            if (r->pos < r->n && done) {
                r->pos++;
                continue;
            }
            if (escaped_char(r, &lo) != 0) return -1;
        } else if (r->s[r->pos] == '[') return regex_fail(r, "nested classes are not supported");
        else if (regex_char(r, &lo) != 0) return -1;
        uint32_t hi = lo;
        if (r->pos + 1 < r->n && r->s[r->pos] == '-' && r->s[r->pos + 1] != ']') {
            r->pos++;
            if (r->s[r->pos] == '\\') {
                r->pos++;
                if (escaped_char(r, &hi) != 0) return -1;
            } else if (regex_char(r, &hi) != 0) return -1;
            if (hi < lo) return regex_fail(r, "a range's end is below its start");
        }
        if (class_add(r, &c, lo, hi) != 0) return -1;
    }
    return put_class(t, &c);
}

/* One atom: a character, an escape, '.', a class or a group. */
static int regex_atom(Regex *r, Text *t) {
    char c = r->s[r->pos];
    if (c == '(') {
        r->pos++;
        if (r->pos + 1 < r->n && r->s[r->pos] == '?') {
            if (r->s[r->pos + 1] != ':') return regex_fail(r, "lookarounds and named or flag groups are not supported");
            r->pos += 2;
        }
        if (++r->depth > 32) return regex_fail(r, "groups nest too deep");
        put(t, "(");
        if (regex_alternates(r, t) != 0) return -1;
        if (r->pos >= r->n || r->s[r->pos] != ')') return regex_fail(r, "expected ')'");
        r->pos++;
        r->depth--;
        put(t, ")");
        return 0;
    }
    if (c == '[') {
        r->pos++;
        return regex_class(r, t);
    }
    if (c == '.') {
        r->pos++;
        ClassSet any = {.n = 1, .r = {{'\n', '\n'}}, .negate = true};
        return put_class(t, &any);
    }
    if (c == '^' || c == '$') return regex_fail(r, "anchors are supported only at the ends of the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') return regex_fail(r, "a quantifier with nothing to repeat");
    uint32_t cp;
    if (c == '\\') {
        r->pos++;
        ClassSet cls = {.n = 0};
        bool done;
        if (r->pos < r->n && class_escape(r, &cls, r->s[r->pos], &done) != 0) return -1;
        if (r->pos < r->n && done) {
            r->pos++;
            return put_class(t, &cls);
        }
        if (escaped_char(r, &cp) != 0) return -1;
    } else if (regex_char(r, &cp) != 0) return -1;
    put_json_char(t, cp);
    return 0;
}

/* A quantifier after an atom, if any. */
static int regex_quantifier(Regex *r, Text *t) {
    if (r->pos >= r->n) return 0;
    char c = r->s[r->pos];
    if (c == '*' || c == '+' || c == '?') {
        r->pos++;
        put(t, "%c", c);
    } else if (c == '{') {
        size_t at = ++r->pos;
        long v[2] = {-1, -1};
        int k = 0;
        for (; r->pos < r->n; r->pos++) {
            char d = r->s[r->pos];
            if (d >= '0' && d <= '9') {
                v[k] = (v[k] < 0 ? 0 : v[k]) * 10 + (d - '0');
                if (v[k] > 1000) return regex_fail(r, "repetition counts go up to 1000");
            } else if (d == ',' && k == 0) k = 1;
            else break;
        }
        if (r->pos >= r->n || r->s[r->pos] != '}' || v[0] < 0 || r->pos == at) return regex_fail(r, "bad {m,n}");
        r->pos++;
        if (k == 0) put(t, "{%ld}", v[0]);
        else if (v[1] < 0) put(t, "{%ld,}", v[0]);
        else if (v[1] < v[0]) return regex_fail(r, "{m,n} with n below m");
        else put(t, "{%ld,%ld}", v[0], v[1]);
    } else return 0;
    /* A lazy quantifier matches the same strings. */
    if (r->pos < r->n && r->s[r->pos] == '?') r->pos++;
    if (r->pos < r->n && strchr("*+?{", r->s[r->pos])) return regex_fail(r, "a quantifier after a quantifier");
    return 0;
}

static int regex_alternates(Regex *r, Text *t) {
    for (;;) {
        put(t, "(\"\"");
        while (r->pos < r->n && r->s[r->pos] != '|' && r->s[r->pos] != ')') {
            put(t, " ");
            if (regex_atom(r, t) != 0 || regex_quantifier(r, t) != 0) return -1;
        }
        put(t, ")");
        if (r->pos >= r->n || r->s[r->pos] != '|') return 0;
        r->pos++;
        put(t, " | ");
    }
}

/* The pattern matches somewhere in the string (Python's re.search): what it
 * does not anchor may have any characters before or after. */
static int gen_pattern(Gen *g, const char *re, size_t n, Text *body) {
    bool start = n > 0 && re[0] == '^';
    bool end = n > (size_t)start && re[n - 1] == '$' && (n < 2 || re[n - 2] != '\\');
    Regex r = {g, re + start, n - start - end, 0, 0};
    if (!start) put(body, "char* ");
    put(body, "(");
    if (regex_alternates(&r, body) != 0) return -1;
    if (r.pos < r.n) return regex_fail(&r, "unmatched ')'");
    put(body, ")");
    if (!end) put(body, " char*");
    return 0;
}

/* ---- arrays and objects ---- */

static int gen_array(Gen *g, const JsonValue *s, Text *body) {
    int min = 0, max = -1;
    if (read_count(g, s, "minItems", &min) != 0 || read_count(g, s, "maxItems", &max) != 0) return -1;
    if (max >= 0 && max < min) return gen_fail(g, "maxItems is below minItems");
    const JsonValue *items = json_get(s, "items");
    const JsonValue *unique = json_get(s, "uniqueItems");
    if (unique && !(unique->type == JSON_BOOL && !unique->boolean)) return gen_fail(g, "uniqueItems is not supported");
    char item[48] = "value";
    if (items) {
        if (items->type == JSON_BOOL && !items->boolean) max = 0;
        else if (items->type != JSON_BOOL) {
            int rule;
            if (sub_rule(g, items, "/items", &rule) != 0) return -1;
            snprintf(item, sizeof item, "%s%d", g->prefix, rule);
        }
    }
    if (max >= 0 && max < min) return gen_fail(g, "items: false with minItems above 0 allows nothing");
    if (max == 0) {
        put(body, "\"[\" ws \"]\"");
        return 0;
    }
    put(body, "\"[\" ws %s%s ws (\",\" ws %s ws)", min == 0 ? "(" : "", item, item);
    if (max < 0) put(body, "{%d,}", min > 0 ? min - 1 : 0);
    else put(body, "{%d,%d}", min > 0 ? min - 1 : 0, max - 1);
    put(body, "%s \"]\"", min == 0 ? ")?" : "");
    return 0;
}

/* A key that is none of names[0..n): rules over the names' trie, one per
 * prefix that some name has (written as r<k> rules; returns the rule of the
 * empty prefix). The key is written without escapes. */
static int gen_other_key(Gen *g, const JsonMember **names, int n, size_t depth, int *out) {
    int rule = new_rule(g);
    Text body = {0};
    bool is_name = false;
    for (int i = 0; i < n; i++) is_name |= names[i]->key_len == depth;
    /* Ending here is allowed unless a name ends here. */
    put(&body, "%s", is_name ? "" : "\"\\\"\"");
    bool any = !is_name;
    /* Each next byte some name has leads on; any other byte frees the key. */
    put(&body, "%s[^\"\\\\\\x00-\\x1F", any ? " | " : "");
    any = true;
    for (int i = 0; i < n; i++)
        if (names[i]->key_len > depth) {
            unsigned char c = (unsigned char)names[i]->key[depth];
            if (c >= 0x80) {
                free(body.p);
                return gen_fail(g, "additionalProperties with non-ASCII property names is not supported");
            }
            if (c == ']' || c == '\\' || c == '-' || c == '^') put(&body, "\\%c", c);
            else if (c >= 0x20) put(&body, "%c", c);
        }
    put(&body, "] key-char* \"\\\"\"");
    for (int i = 0; i < n; i++) {
        if (names[i]->key_len <= depth) continue;
        unsigned char c = (unsigned char)names[i]->key[depth];
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= names[j]->key_len > depth && (unsigned char)names[j]->key[depth] == c && memcmp(names[j]->key, names[i]->key, depth) == 0;
        if (seen || c < 0x20 || c == '"' || c == '\\') continue;
        /* The names that go on with c. */
        const JsonMember **next = xmalloc((size_t)n * sizeof *next);
        int m = 0;
        for (int j = 0; j < n; j++)
            if (names[j]->key_len > depth && (unsigned char)names[j]->key[depth] == c) next[m++] = names[j];
        int child;
        int rc = gen_other_key(g, next, m, depth + 1, &child);
        free(next);
        if (rc != 0) return free(body.p), -1;
        put(&body, " | \"");
        put_gbnf_chars(&body, (const char *)&c, 1);
        put(&body, "\" %s%d", g->prefix, child);
    }
    int rc = add_rule(g, rule, &body);
    free(body.p);
    *out = rule;
    return rc;
}

static int gen_object(Gen *g, const JsonValue *s, Text *body) {
    const JsonValue *props = json_get(s, "properties"), *required = json_get(s, "required");
    const JsonValue *extra = json_get(s, "additionalProperties");
    if (props && props->type != JSON_OBJECT) return gen_fail(g, "'properties' must be an object");
    if (required && required->type != JSON_ARRAY) return gen_fail(g, "'required' must be an array");
    size_t n_props = props ? props->len : 0, n_req = required ? required->len : 0;
    bool extras = extra && !(extra->type == JSON_BOOL && !extra->boolean);
    /* An object schema that names nothing allows any members. */
    if (!props && !required && !extra) return put(body, "object"), 0;
    /* The members: the named properties in order, then required names the
     * properties do not list (any value). */
    const JsonMember **members = xmalloc((n_props + n_req + 1) * sizeof *members);
    bool *needed = xcalloc(n_props + n_req + 1, sizeof *needed);
    JsonMember *unlisted = xcalloc(n_req + 1, sizeof *unlisted);
    int n = 0, rc = 0;
    for (size_t i = 0; i < n_props; i++) members[n++] = &props->members[i];
    for (size_t i = 0; i < n_req && rc == 0; i++) {
        const JsonValue *r = &required->items[i];
        if (r->type != JSON_STRING) {
            rc = gen_fail(g, "'required' must list strings");
            break;
        }
        int k = 0;
        while (k < n && !(members[k]->key_len == r->len && memcmp(members[k]->key, r->string, r->len) == 0)) k++;
        if (k == n) {
            if (!extras) {
                rc = gen_fail(g, "required property '%s' is not in 'properties' and additionalProperties is false", r->string);
                break;
            }
            unlisted[i] = (JsonMember){.key = r->string, .key_len = r->len, .value = {.type = JSON_BOOL, .boolean = true}};
            members[n++] = &unlisted[i];
        }
        needed[k] = true;
    }
    /* m_i ::= "\"name\"" ws ":" ws value ws */
    int *value_rule = xcalloc((size_t)n + 1, sizeof *value_rule);
    for (int i = 0; i < n && rc == 0; i++) {
        char where[64];
        snprintf(where, sizeof where, "/properties/%.40s", members[i]->key);
        if (members[i]->value.type == JSON_BOOL && !members[i]->value.boolean) {
            if (needed[i]) rc = gen_fail(g, "required property '%s' has the schema false", members[i]->key);
            value_rule[i] = -1;  /* never written */
        } else rc = sub_rule(g, &members[i]->value, where, &value_rule[i]);
    }
    int extra_value = 0, extra_key = 0;
    if (rc == 0 && extras) {
        if (extra->type == JSON_BOOL) extra_value = 0;
        else rc = sub_rule(g, extra, "/additionalProperties", &extra_value);
        if (rc == 0) rc = gen_other_key(g, members, n, 0, &extra_key);
    }
    if (rc == 0) {
        /* first_i: members i.. with none written yet; after_i: some written. */
        int first = g->n_rules + 1, after = first + n + 1;
        g->n_rules += 2 * (n + 1);
        Text one = {0};
        for (int i = n; i >= 0 && rc == 0; i--) {
            Text member = {0};
            if (i < n && value_rule[i] >= 0) {
                put_json_string(&member, members[i]->key, members[i]->key_len);
                Text lit = {0};
                put(&lit, "\"%s\" ws \":\" ws %s%d ws", member.p, g->prefix, value_rule[i]);
                free(member.p);
                member = lit;
            }
            char extra_member[160], extra_name[48];
            if (extra_value) snprintf(extra_name, sizeof extra_name, "%s%d", g->prefix, extra_value);
            else snprintf(extra_name, sizeof extra_name, "value");
            snprintf(extra_member, sizeof extra_member, "\"\\\"\" %s%d ws \":\" ws %s ws", g->prefix, extra_key, extra_name);
            one.n = 0;
            if (i == n) put(&one, extras ? "(%s (\",\" ws %s)*)?" : "\"\"", extra_member, extra_member);
            else if (value_rule[i] < 0) put(&one, "%s%d", g->prefix, first + i + 1);
            else if (needed[i]) put(&one, "%s %s%d", member.p, g->prefix, after + i + 1);
            else put(&one, "%s %s%d | %s%d", member.p, g->prefix, after + i + 1, g->prefix, first + i + 1);
            if (rc == 0) rc = add_rule(g, first + i, &one);
            one.n = 0;
            if (i == n) put(&one, extras ? "(\",\" ws %s)*" : "\"\"", extra_member);
            else if (value_rule[i] < 0) put(&one, "%s%d", g->prefix, after + i + 1);
            else put(&one, "\",\" ws %s %s%d", member.p, g->prefix, after + i + 1);
            if (i < n && value_rule[i] >= 0 && !needed[i]) put(&one, " | %s%d", g->prefix, after + i + 1);
            if (rc == 0) rc = add_rule(g, after + i, &one);
            free(member.p);
        }
        free(one.p);
        put(body, "\"{\" ws %s%d \"}\"", g->prefix, first);
    }
    free(members);
    free(needed);
    free(unlisted);
    free(value_rule);
    return rc;
}

/* ---- schemas ---- */

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
static const char *const keywords[] = {"type", "properties", "required", "additionalProperties", "enum", "const", "anyOf",
                                       "oneOf", "allOf", "$ref", "items", "minItems", "maxItems", "uniqueItems", "minLength",
                                       "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                       "exclusiveMaximum", NULL};

static bool in_list(const char *const *list, const char *key) {
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], key) == 0) return true;
    return false;
}

/* The schema a "$ref" names. */
static const JsonValue *resolve_ref(Gen *g, const JsonValue *ref) {
    if (ref->type != JSON_STRING) return gen_fail(g, "'$ref' must be a string"), NULL;
    const char *r = ref->string;
    if (strcmp(r, "#") == 0) return g->root;
    const char *name = NULL;
    const JsonValue *defs = NULL;
    if (strncmp(r, "#/$defs/", 8) == 0) name = r + 8, defs = json_get(g->root, "$defs");
    else if (strncmp(r, "#/definitions/", 14) == 0) name = r + 14, defs = json_get(g->root, "definitions");
    else return gen_fail(g, "$ref '%s' is not supported (only #, #/$defs/NAME and #/definitions/NAME)", r), NULL;
    if (strchr(name, '/') || strchr(name, '~') || strchr(name, '%'))
        return gen_fail(g, "$ref '%s': nested or escaped names are not supported", r), NULL;
    const JsonValue *target = defs ? json_get(defs, name) : NULL;
    if (!target) return gen_fail(g, "$ref '%s' names no definition", r), NULL;
    return target;
}

/* The bit of schema_types for the type of value v. */
static int value_type_bit(const JsonValue *v) {
    static const JsonType kinds[] = {JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT};
    for (int k = 0; k < 6; k++)
        if (kinds[k] == v->type) return 1 << k;
    return 0;
}

/* The bits of the types a "type" keyword names. */
static int type_bits(const JsonValue *type) {
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object", "integer"};
    int bits = 0;
    size_t n = type->type == JSON_ARRAY ? type->len : 1;
    for (size_t i = 0; i < n; i++) {
        const JsonValue *t = type->type == JSON_ARRAY ? &type->items[i] : type;
        for (int k = 0; k < 7 && t->type == JSON_STRING; k++)
            if (strcmp(t->string, names[k]) == 0) bits |= 1 << (k == 6 ? 2 : k);
    }
    return bits;
}

/* The JSON types a schema can match, as bits (1 null, 2 boolean, 4 number,
 * 8 string, 16 array, 32 object), for oneOf's check; all when unknown. */
static int schema_types(Gen *g, const JsonValue *s, int depth) {
    if (depth > SCHEMA_MAX_DEPTH) return 63;
    if (s->type == JSON_BOOL) return s->boolean ? 63 : 0;
    if (s->type != JSON_OBJECT) return 63;
    const JsonValue *ref = json_get(s, "$ref"), *type = json_get(s, "type"), *c = json_get(s, "const");
    const JsonValue *e = json_get(s, "enum");
    if (ref) {
        const JsonValue *t = resolve_ref(g, ref);
        return t ? schema_types(g, t, depth + 1) : 63;
    }
    int bits = 0;
    if (c || e) {
        const JsonValue *vals = c ? c : e;
        size_t n = c ? 1 : (e->type == JSON_ARRAY ? e->len : 0);
        for (size_t i = 0; i < n; i++) bits |= value_type_bit(c ? vals : &vals->items[i]);
        return bits;
    }
    return type ? type_bits(type) : 63;
}

/* The alternatives of anyOf/oneOf: each a rule. */
static int gen_alternatives(Gen *g, const JsonValue *list, const char *key, Text *body) {
    if (list->type != JSON_ARRAY || list->len == 0) return gen_fail(g, "'%s' must be a non-empty array", key);
    if (strcmp(key, "oneOf") == 0) {
        int seen = 0;
        for (size_t i = 0; i < list->len; i++) {
            int t = schema_types(g, &list->items[i], 0);
            if (t & seen)
                return gen_fail(g, "oneOf whose branches may match the same value is not supported (give them different types, or use anyOf)");
            seen |= t;
        }
    }
    for (size_t i = 0; i < list->len; i++) {
        char where[48];
        snprintf(where, sizeof where, "/%s/%zu", key, i);
        int rule;
        if (sub_rule(g, &list->items[i], where, &rule) != 0) return -1;
        put(body, "%s%s%d", i ? " | " : "", g->prefix, rule);
    }
    return 0;
}

/* One named type with the schema's keywords for it. */
static int gen_type(Gen *g, const JsonValue *s, const char *type, Text *body) {
    if (strcmp(type, "string") == 0) return gen_string(g, s, body);
    if (strcmp(type, "integer") == 0) return gen_number(g, s, body, true);
    if (strcmp(type, "number") == 0) return gen_number(g, s, body, false);
    if (strcmp(type, "boolean") == 0) return put(body, "(\"true\" | \"false\")"), 0;
    if (strcmp(type, "null") == 0) return put(body, "\"null\""), 0;
    if (strcmp(type, "array") == 0) return gen_array(g, s, body);
    if (strcmp(type, "object") == 0) return gen_object(g, s, body);
    return gen_fail(g, "unknown type '%s'", type);
}

/* Which type keywords a schema without "type" implies. */
static const char *implied_type(const JsonValue *s) {
    if (json_get(s, "properties") || json_get(s, "required") || json_get(s, "additionalProperties")) return "object";
    if (json_get(s, "items") || json_get(s, "minItems") || json_get(s, "maxItems")) return "array";
    if (json_get(s, "minLength") || json_get(s, "maxLength") || json_get(s, "pattern") || json_get(s, "format")) return "string";
    if (json_get(s, "minimum") || json_get(s, "maximum") || json_get(s, "exclusiveMinimum") || json_get(s, "exclusiveMaximum"))
        return "number";
    return NULL;
}

static int gen_body(Gen *g, const JsonValue *s, Text *body) {
    if (s->type == JSON_BOOL) {
        if (!s->boolean) return gen_fail(g, "the schema false allows no value");
        put(body, "value");
        return 0;
    }
    if (s->type != JSON_OBJECT) return gen_fail(g, "a schema must be an object or a boolean, not %s", json_type_name(s->type));
    for (size_t i = 0; i < s->len; i++) {
        const char *k = s->members[i].key;
        if (!in_list(keywords, k) && !in_list(annotations, k)) return gen_fail(g, "keyword '%s' is not supported", k);
    }
    const JsonValue *ref = json_get(s, "$ref"), *c = json_get(s, "const"), *e = json_get(s, "enum");
    const JsonValue *any = json_get(s, "anyOf"), *one = json_get(s, "oneOf"), *all = json_get(s, "allOf");
    const JsonValue *type = json_get(s, "type");
    int combined = (ref != NULL) + (c != NULL) + (e != NULL) + (any != NULL) + (one != NULL) + (all != NULL);
    if (combined > 1) return gen_fail(g, "only one of $ref, const, enum, anyOf, oneOf and allOf is supported in one schema");
    if (combined == 1 && (((c || e) ? false : type != NULL) || implied_type(s)))
        return gen_fail(g, "$ref, const, enum, anyOf, oneOf and allOf are supported only without other keywords beside them "
                           "(but type beside const or enum)");
    if (ref) {
        const JsonValue *target = resolve_ref(g, ref);
        if (!target) return -1;
        for (int i = 0; i < g->n_refs; i++)
            if (g->refs[i].node == target) return put(body, "%s%d", g->prefix, g->refs[i].rule), 0;
        g->refs = xrealloc(g->refs, (size_t)g->n_refs + 1, sizeof *g->refs);
        int rule = new_rule(g);
        g->refs[g->n_refs++] = (RefRule){target, rule};
        size_t at = strlen(g->path);
        snprintf(g->path + at, sizeof g->path - at, "%s", ref->string + 1);
        if (++g->depth > SCHEMA_MAX_DEPTH) return gen_fail(g, "schemas nest deeper than %d", SCHEMA_MAX_DEPTH);
        int rc = gen_schema(g, target, rule);
        g->depth--;
        g->path[at] = '\0';
        put(body, "%s%d", g->prefix, rule);
        return rc;
    }
    if (c || e) {
        const JsonValue *list = c ? c : e;
        if (e && (e->type != JSON_ARRAY || e->len == 0)) return gen_fail(g, "'enum' must be a non-empty array");
        size_t n = c ? 1 : e->len;
        int allowed = type ? type_bits(type) : 63;
        bool integer_only = type && type->type == JSON_STRING && strcmp(type->string, "integer") == 0;
        int written = 0;
        put(body, "(");
        for (size_t i = 0; i < n; i++) {
            const JsonValue *v = c ? list : &list->items[i];
            if (!literal_ok(v)) return gen_fail(g, "a value that JSON cannot write");
            /* With a type beside it, only the values of that type. */
            if (!(allowed & value_type_bit(v)) || (integer_only && !(v->type == JSON_NUMBER && v->number.value == floor(v->number.value))))
                continue;
            put(body, "%s", written++ ? " | " : "");
            put_json_value(body, v);
        }
        put(body, ")");
        if (written == 0) return gen_fail(g, "no value of the %s has the type given", c ? "const" : "enum");
        return 0;
    }
    if (any) return gen_alternatives(g, any, "anyOf", body);
    if (one) return gen_alternatives(g, one, "oneOf", body);
    if (all) {
        if (all->type != JSON_ARRAY || all->len != 1) return gen_fail(g, "allOf is supported only with a single schema");
        int rule;
        if (sub_rule(g, &all->items[0], "/allOf/0", &rule) != 0) return -1;
        put(body, "%s%d", g->prefix, rule);
        return 0;
    }
    if (!type) {
        const char *implied = implied_type(s);
        if (!implied) return put(body, "value"), 0;
        return gen_type(g, s, implied, body);
    }
    if (type->type == JSON_STRING) return gen_type(g, s, type->string, body);
    if (type->type != JSON_ARRAY || type->len == 0) return gen_fail(g, "'type' must be a string or a non-empty array of strings");
    put(body, "(");
    for (size_t i = 0; i < type->len; i++) {
        if (type->items[i].type != JSON_STRING) return gen_fail(g, "'type' must list strings");
        put(body, "%s", i ? " | " : "");
        if (gen_type(g, s, type->items[i].string, body) != 0) return -1;
    }
    put(body, ")");
    return 0;
}

static int gen_schema(Gen *g, const JsonValue *s, int rule) {
    Text body = {0};
    int rc = gen_body(g, s, &body);
    if (rc == 0) rc = add_rule(g, rule, &body);
    free(body.p);
    return rc;
}

/* The JSON basics every schema grammar may use; ws is SCHEMA_MAX_SPACE
 * bytes at most. */
_Static_assert(SCHEMA_MAX_SPACE == 16, "the ws rule below spells out SCHEMA_MAX_SPACE");
static const char basics[] =
    "ws ::= [ \\t\\n]{0,16}\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)*)? \"}\"\n"
    "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= key-char | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" hex4)\n"
    "key-char ::= [^\"\\\\\\x00-\\x1F]\n"
    /* \u escapes of surrogates are left out: a lone one is no character. */
    "hex4 ::= [0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}\n"
    "integer ::= \"-\"? natural\n"
    "natural ::= \"0\" | [1-9] [0-9]{0,15}\n"
    "number ::= integer frac? ([eE] [-+]? [0-9]{1,2})?\n"
    "frac ::= \".\" [0-9]{1,16}\n"
    "zero-frac ::= \".\" \"0\"{1,16}\n"
    "date ::= year \"-\" (\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n"
    "    | year \"-\" (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\")\n"
    "    | year \"-02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])\n"
    "    | leap-year \"-02-29\"\n"
    "year ::= \"000\" [1-9] | \"00\" [1-9] [0-9] | \"0\" [1-9] [0-9]{2} | [1-9] [0-9]{3}\n"
    "leap-year ::= [0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\"\n"
    "time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "date-time ::= date \"T\" time\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n"
    "hex ::= [0-9a-fA-F]\n";

const char *schema_gbnf_basics(void) { return basics; }

char *schema_gbnf_rules(const JsonValue *schema, const char *prefix, Error *e) {
    size_t n = strlen(prefix);
    if (n == 0 || n > SCHEMA_MAX_PREFIX || strspn(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != n) {
        fail(e, "schema_gbnf_rules: a bad rule prefix");
        return NULL;
    }
    Gen g = {.root = schema, .prefix = prefix, .e = e};
    int rule = new_rule(&g);
    int rc = gen_schema(&g, schema, rule);
    free(g.refs);
    if (rc != 0) {
        free(g.rules.p);
        return NULL;
    }
    return g.rules.p;
}

char *schema_to_gbnf(const char *text, size_t len, Error *e) {
    JsonDoc doc;
    Error je;
    if (json_parse(&doc, text, len, &je) != 0) {
        fail(e, "the schema is not JSON: %s", je.msg);
        return NULL;
    }
    char *rules = schema_gbnf_rules(&doc.root, "r", e);
    json_free(&doc);
    if (!rules) return NULL;
    Text t = {0};
    put(&t, "root ::= r1\n%s%s", rules, basics);
    free(rules);
    return t.p;
}
