/* gbnf.c - llama.cpp's GBNF grammar text parsed into rules of byte sets
 * (gbnf.h), with the bounds an untrusted grammar needs: its size, the
 * nesting of groups, repetition counts, the number of elements. */
#include "gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

/* "line L, column C: message" for the parser's position. */
static int parse_error(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int parse_error(Parser *p, const char *fmt, ...) {
    int line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->text[i] == '\n') line++, col = 1;
        else col++;
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(p->e, "line %d, column %d: %s", line, col, msg);
}

static int peek(const Parser *p) { return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1; }

/* Skips spaces, newlines and # comments. */
static void skip_space(Parser *p) {
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') p->pos++;
        else if (c == '#') {
            while (p->pos < p->len && p->text[p->pos] != '\n') p->pos++;
        } else break;
    }
}

static bool is_name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static size_t name_len(const Parser *p, size_t at) {
    size_t n = 0;
    while (at + n < p->len && is_name_char((unsigned char)p->text[at + n])) n++;
    return n;
}

static int add_rule(Parser *p, const char *name, size_t n) {
    if (p->n_rules == p->cap_rules) {
        p->cap_rules = p->cap_rules ? 2 * p->cap_rules : 16;
        p->rules = xrealloc(p->rules, (size_t)p->cap_rules, sizeof *p->rules);
    }
    ParseRule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = xmalloc(n + 1);
    memcpy(r->name, name, n);
    r->name[n] = '\0';
    r->used_at = p->pos;
    return p->n_rules++;
}

static size_t hash_name(const char *name, size_t n) {
    uint64_t h = 1469598103934665603u;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)name[i]) * 1099511628211u;
    return (size_t)h;
}

/* The rule named name[0..n), made (undefined yet) when it is new. */
static int find_rule(Parser *p, const char *name, size_t n) {
    if ((size_t)(p->n_named + 1) * 2 > p->by_name_cap) {
        /* Grow the table (at most half full) and put the names back. */
        size_t cap = p->by_name_cap ? 2 * p->by_name_cap : 64;
        int *table = xmalloc(cap * sizeof *table);
        memset(table, -1, cap * sizeof *table);
        for (size_t i = 0; i < p->by_name_cap; i++) {
            int id = p->by_name[i];
            if (id < 0) continue;
            size_t h = hash_name(p->rules[id].name, strlen(p->rules[id].name)) & (cap - 1);
            while (table[h] >= 0) h = (h + 1) & (cap - 1);
            table[h] = id;
        }
        free(p->by_name);
        p->by_name = table;
        p->by_name_cap = cap;
    }
    size_t h = hash_name(name, n) & (p->by_name_cap - 1);
    for (; p->by_name[h] >= 0; h = (h + 1) & (p->by_name_cap - 1)) {
        const char *r = p->rules[p->by_name[h]].name;
        if (strlen(r) == n && memcmp(r, name, n) == 0) return p->by_name[h];
    }
    p->n_named++;
    return p->by_name[h] = add_rule(p, name, n);
}

/* A rule made for a group, a repetition or a class, named after the rule
 * being defined (for messages). */
static int new_rule(Parser *p, int parent) {
    char name[96];
    snprintf(name, sizeof name, "%.80s (part)", p->rules[parent].name);
    int id = add_rule(p, name, strlen(name));
    p->rules[id].defined = true;
    return id;
}

static int seq_push(Parser *p, Seq *s, int kind, int arg) {
    if (++p->n_elems > GRAMMAR_MAX_ELEMENTS) return parse_error(p, "the grammar is too large (over %d elements)", GRAMMAR_MAX_ELEMENTS);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->items = xrealloc(s->items, (size_t)s->cap, sizeof *s->items);
    }
    s->items[s->n++] = (Elem){kind, arg};
    return 0;
}

/* Adds seq (taking its memory) as an alternative of rule r. */
static void rule_add_alt(Parser *p, int r, Seq seq) {
    ParseRule *rule = &p->rules[r];
    if (rule->n_alts == rule->cap_alts) {
        rule->cap_alts = rule->cap_alts ? 2 * rule->cap_alts : 4;
        rule->alts = xrealloc(rule->alts, (size_t)rule->cap_alts, sizeof *rule->alts);
    }
    rule->alts[rule->n_alts++] = seq;
}

static int add_set(Parser *p, const ByteSet *s) {
    if (p->n_sets == p->cap_sets) {
        p->cap_sets = p->cap_sets ? 2 * p->cap_sets : 64;
        p->sets = xrealloc(p->sets, (size_t)p->cap_sets, sizeof *p->sets);
    }
    p->sets[p->n_sets] = *s;
    return p->n_sets++;
}

static int push_byte(Parser *p, Seq *s, int b) {
    ByteSet set = {{0}};
    set_add_range(&set, b, b);
    return seq_push(p, s, EL_BYTES, add_set(p, &set));
}

/* ---- Unicode: code points from the text, UTF-8 out ---- */

/* Reads one UTF-8 character of the grammar text into *cp. */
static int read_utf8(Parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->text + p->pos;
    size_t left = p->len - p->pos;
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return parse_error(p, "invalid UTF-8 in the grammar");
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return parse_error(p, "invalid UTF-8 in the grammar");
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return parse_error(p, "invalid UTF-8 in the grammar");
    p->pos += (size_t)n;
    *cp = c;
    return 0;
}

static int utf8_encode(uint32_t c, unsigned char *out) {
    if (c < 0x80) return out[0] = (unsigned char)c, 1;
    if (c < 0x800) return out[0] = (unsigned char)(0xC0 | c >> 6), out[1] = (unsigned char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xE0 | c >> 12), out[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | c >> 18), out[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F)), out[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* One character of a literal or class: an escape or a UTF-8 character. */
static int read_char(Parser *p, uint32_t *cp) {
    if (peek(p) != '\\') return read_utf8(p, cp);
    p->pos++;
    int c = peek(p);
    if (c < 0) return parse_error(p, "the grammar ends inside an escape");
    p->pos++;
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = hex_digit(peek(p));
            if (h < 0) return parse_error(p, "\\%c needs %d hex digits", c, digits);
            v = v << 4 | (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return parse_error(p, "\\%c%0*X is not a Unicode scalar value", c, digits, v);
        *cp = v;
        return 0;
    }
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case '0': *cp = 0; return 0;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
        *cp = (uint32_t)c;
        return 0;
    }
    p->pos--;
    if (c <= ' ' || c >= 0x7F) return parse_error(p, "unknown escape: '\\' before byte 0x%02X", c);
    return parse_error(p, "unknown escape '\\%c'", c);
}

/* ---- character classes ---- */

typedef struct {
    uint32_t lo, hi;
} Range;

static int compare_range(const void *a, const void *b) {
    const Range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges ranges in place (negating them over all of Unicode when
 * asked), leaving out the surrogates; returns how many remain (at most n + 2). */
static int normalize_ranges(Range *r, int n, bool negate) {
    qsort(r, (size_t)n, sizeof *r, compare_range);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else r[m++] = r[i];
    }
    if (negate) {
        Range *out = xmalloc(((size_t)m + 1) * sizeof *out);
        int k = 0;
        uint32_t next = 0;
        for (int i = 0; i < m; i++) {
            if (r[i].lo > next) out[k++] = (Range){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) out[k++] = (Range){next, 0x10FFFF};
        memcpy(r, out, (size_t)k * sizeof *r);
        free(out);
        m = k;
    }
    /* Cut the surrogates out: they have no UTF-8 form. */
    int k = 0;
    Range *out = xmalloc(((size_t)m * 2 + 1) * sizeof *out);
    for (int i = 0; i < m; i++) {
        if (r[i].hi < 0xD800 || r[i].lo > 0xDFFF) out[k++] = r[i];
        else {
            if (r[i].lo < 0xD800) out[k++] = (Range){r[i].lo, 0xD7FF};
            if (r[i].hi > 0xDFFF) out[k++] = (Range){0xE000, r[i].hi};
        }
    }
    memcpy(r, out, (size_t)k * sizeof *r);
    free(out);
    return k;
}

typedef struct {
    Parser *p;
    int rule;         /* the class's rule (multi-byte alternatives) */
    ByteSet single;   /* every one-byte character of the class */
    int failed;
} ClassBuild;

/* Adds the code points [lo, hi] of one UTF-8 length: split until every byte
 * position runs over a plain range, then one alternative of byte sets. */
static void class_add_same_length(ClassBuild *cb, uint32_t lo, uint32_t hi, int n) {
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                class_add_same_length(cb, lo, lo | m, n);
                class_add_same_length(cb, (lo | m) + 1, hi, n);
                return;
            }
            if ((hi & m) != m) {
                class_add_same_length(cb, lo, (hi & ~m) - 1, n);
                class_add_same_length(cb, hi & ~m, hi, n);
                return;
            }
        }
    }
    unsigned char a[4], b[4];
    utf8_encode(lo, a);
    utf8_encode(hi, b);
    if (n == 1) {
        set_add_range(&cb->single, a[0], b[0]);
        return;
    }
    Seq seq = {0};
    for (int i = 0; i < n && !cb->failed; i++) {
        ByteSet s = {{0}};
        set_add_range(&s, a[i], b[i]);
        cb->failed = seq_push(cb->p, &seq, EL_BYTES, add_set(cb->p, &s));
    }
    rule_add_alt(cb->p, cb->rule, seq);
}

/* Pushes onto seq the element that matches one character of ranges[0..n)
 * (normalized): a byte set when all are ASCII, else a rule of the UTF-8 forms. */
static int push_class(Parser *p, Seq *seq, int parent, const Range *r, int n) {
    bool ascii = n == 0 || r[n - 1].hi < 0x80;
    if (ascii) {
        ByteSet s = {{0}};
        for (int i = 0; i < n; i++) set_add_range(&s, (int)r[i].lo, (int)r[i].hi);
        return seq_push(p, seq, EL_BYTES, add_set(p, &s));
    }
    ClassBuild cb = {p, new_rule(p, parent), {{0}}, 0};
    static const uint32_t last_of_length[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int i = 0; i < n && !cb.failed; i++)
        for (int len = 1, first = 0; len <= 4; first = (int)last_of_length[len - 1] + 1, len++) {
            uint32_t lo = r[i].lo > (uint32_t)first ? r[i].lo : (uint32_t)first;
            uint32_t hi = r[i].hi < last_of_length[len - 1] ? r[i].hi : last_of_length[len - 1];
            if (lo <= hi) class_add_same_length(&cb, lo, hi, len);
        }
    if (cb.failed) return -1;
    ByteSet empty = {{0}};
    if (memcmp(&cb.single, &empty, sizeof empty) != 0) {
        Seq one = {0};
        if (seq_push(p, &one, EL_BYTES, add_set(p, &cb.single)) != 0) return -1;
        rule_add_alt(p, cb.rule, one);
    }
    return seq_push(p, seq, EL_REF, cb.rule);
}

/* [...] or [^...]: the opening bracket is at p->pos. */
static int parse_class(Parser *p, Seq *seq, int parent) {
    p->pos++;
    bool negate = peek(p) == '^';
    if (negate) p->pos++;
    Range *r = NULL;
    int n = 0, cap = 0;
    int rc = 0;
    while (rc == 0) {
        if (peek(p) < 0) {
            rc = parse_error(p, "unterminated character class");
            break;
        }
        if (peek(p) == ']') {
            p->pos++;
            break;
        }
        uint32_t lo, hi;
        if ((rc = read_char(p, &lo)) != 0) break;
        hi = lo;
        if (peek(p) == '-' && p->pos + 1 < p->len && p->text[p->pos + 1] != ']') {
            p->pos++;
            if ((rc = read_char(p, &hi)) != 0) break;
            if (hi < lo) {
                rc = parse_error(p, "the range's end is below its start");
                break;
            }
        }
        if (n + 3 > cap) {
            cap = cap ? 2 * cap : 16;
            r = xrealloc(r, (size_t)cap, sizeof *r);
        }
        r[n++] = (Range){lo, hi};
    }
    if (rc == 0) {
        if (n + 3 > cap) r = xrealloc(r, (size_t)n + 3, sizeof *r);
        n = normalize_ranges(r, n, negate);
        rc = push_class(p, seq, parent, r, n);
    }
    free(r);
    return rc;
}

/* "...": each character's UTF-8 bytes, one element each. */
static int parse_literal(Parser *p, Seq *seq) {
    p->pos++;
    for (;;) {
        if (peek(p) < 0) return parse_error(p, "unterminated literal");
        if (peek(p) == '"') {
            p->pos++;
            return 0;
        }
        uint32_t cp;
        if (read_char(p, &cp) != 0) return -1;
        unsigned char bytes[4];
        int n = utf8_encode(cp, bytes);
        for (int i = 0; i < n; i++)
            if (push_byte(p, seq, bytes[i]) != 0) return -1;
    }
}

/* ---- repetition ---- */

/* Reads {m}, {m,} or {m,n} (the brace at p->pos); max -1 for no bound. */
static int parse_braces(Parser *p, int *min, int *max) {
    p->pos++;
    skip_space(p);
    long v[2] = {0, -1};
    int count = 0;
    for (int k = 0; k < 2; k++) {
        if (peek(p) >= '0' && peek(p) <= '9') {
            long x = 0;
            while (peek(p) >= '0' && peek(p) <= '9') {
                x = x * 10 + (peek(p) - '0');
                if (x > GRAMMAR_MAX_REPEAT) return parse_error(p, "repetition counts go up to %d", GRAMMAR_MAX_REPEAT);
                p->pos++;
            }
            v[k] = x;
            count++;
        } else if (k == 0) return parse_error(p, "expected a number after '{'");
        skip_space(p);
        if (k == 0) {
            if (peek(p) == '}') {
                v[1] = v[0];
                break;
            }
            if (peek(p) != ',') return parse_error(p, "expected ',' or '}'");
            p->pos++;
            skip_space(p);
        }
    }
    if (peek(p) != '}') return parse_error(p, "expected '}'");
    p->pos++;
    if (v[1] >= 0 && v[1] < v[0]) return parse_error(p, "{%ld,%ld}: the maximum is below the minimum", v[0], v[1]);
    *min = (int)v[0];
    *max = (int)v[1];
    return 0;
}

/* Replaces the item seq[start..) by min..max (max -1: any number) copies of it. */
static int repeat_item(Parser *p, Seq *seq, int start, int parent, int min, int max) {
    if (seq->n == start) return 0;  /* repeating nothing is nothing */
    Elem item = seq->items[start];
    if (seq->n - start > 1) {
        /* The item is several elements (a literal): it becomes one rule. */
        Seq body = {0};
        for (int i = start; i < seq->n; i++)
            if (seq_push(p, &body, seq->items[i].kind, seq->items[i].arg) != 0) return free(body.items), -1;
        item = (Elem){EL_REF, new_rule(p, parent)};
        rule_add_alt(p, item.arg, body);
    }
    seq->n = start;
    for (int i = 0; i < min; i++)
        if (seq_push(p, seq, item.kind, item.arg) != 0) return -1;
    if (max < 0) {
        /* star ::= item star | (empty) */
        int star = new_rule(p, parent);
        Seq once = {0};
        if (seq_push(p, &once, item.kind, item.arg) != 0 || seq_push(p, &once, EL_REF, star) != 0) return free(once.items), -1;
        rule_add_alt(p, star, once);
        rule_add_alt(p, star, (Seq){0});
        return seq_push(p, seq, EL_REF, star);
    }
    /* up to k more: opt_k ::= item opt_(k-1) | (empty) */
    int tail = -1;
    for (int k = 0; k < max - min; k++) {
        int opt = new_rule(p, parent);
        Seq once = {0};
        if (seq_push(p, &once, item.kind, item.arg) != 0 || (tail >= 0 && seq_push(p, &once, EL_REF, tail) != 0))
            return free(once.items), -1;
        rule_add_alt(p, opt, once);
        rule_add_alt(p, opt, (Seq){0});
        tail = opt;
    }
    return tail >= 0 ? seq_push(p, seq, EL_REF, tail) : 0;
}

/* ---- rules ---- */

static int parse_alternates(Parser *p, int rule);

/* Whether a rule definition (name ::=) starts at p->pos. */
static bool at_definition(const Parser *p) {
    size_t n = name_len(p, p->pos);
    if (n == 0) return false;
    size_t i = p->pos + n;
    while (i < p->len && (p->text[i] == ' ' || p->text[i] == '\t')) i++;
    return i + 3 <= p->len && memcmp(p->text + i, "::=", 3) == 0;
}

/* One alternative: elements up to '|', ')', the next definition or the end. */
static int parse_sequence(Parser *p, int rule, Seq *seq) {
    for (;;) {
        skip_space(p);
        int c = peek(p);
        if (c < 0 || c == '|' || c == ')' || at_definition(p)) return 0;
        int start = seq->n, rc;
        if (c == '"') rc = parse_literal(p, seq);
        else if (c == '[') rc = parse_class(p, seq, rule);
        else if (c == '.') {
            p->pos++;
            Range all[3] = {{0, 0x10FFFF}};
            int n = normalize_ranges(all, 1, false);
            rc = push_class(p, seq, rule, all, n);
        } else if (c == '(') {
            if (++p->nesting > GRAMMAR_MAX_NESTING) return parse_error(p, "groups nest deeper than %d", GRAMMAR_MAX_NESTING);
            p->pos++;
            int group = new_rule(p, rule);
            rc = parse_alternates(p, group);
            if (rc == 0) {
                skip_space(p);
                if (peek(p) != ')') return parse_error(p, "expected ')'");
                p->pos++;
                p->nesting--;
                rc = seq_push(p, seq, EL_REF, group);
            }
        } else if (is_name_char(c)) {
            size_t n = name_len(p, p->pos);
            int ref = find_rule(p, p->text + p->pos, n);
            p->pos += n;
            rc = seq_push(p, seq, EL_REF, ref);
        } else if (c == '<') rc = parse_error(p, "token references (<...>) are not supported");
        else if (c <= ' ' || c >= 0x7F) rc = parse_error(p, "unexpected byte 0x%02X", c);
        else rc = parse_error(p, "unexpected '%c'", c);
        if (rc != 0) return -1;
        /* Postfix operators apply to the item just read. */
        for (;;) {
            c = peek(p);
            int min = 0, max = 0;
            if (c == '*') min = 0, max = -1, p->pos++;
            else if (c == '+') min = 1, max = -1, p->pos++;
            else if (c == '?') min = 0, max = 1, p->pos++;
            else if (c == '{') {
                if (parse_braces(p, &min, &max) != 0) return -1;
            } else break;
            if (repeat_item(p, seq, start, rule, min, max) != 0) return -1;
        }
    }
}

static int parse_alternates(Parser *p, int rule) {
    for (;;) {
        Seq seq = {0};
        if (parse_sequence(p, rule, &seq) != 0) return free(seq.items), -1;
        rule_add_alt(p, rule, seq);
        skip_space(p);
        if (peek(p) != '|') return 0;
        p->pos++;
    }
}

static int parse_grammar(Parser *p) {
    skip_space(p);
    while (p->pos < p->len) {
        size_t n = name_len(p, p->pos);
        if (n == 0) return parse_error(p, "expected a rule name");
        int r = find_rule(p, p->text + p->pos, n);
        if (p->rules[r].defined) return parse_error(p, "rule '%s' is defined twice", p->rules[r].name);
        p->rules[r].defined = true;
        p->pos += n;
        skip_space(p);
        if (p->len - p->pos < 3 || memcmp(p->text + p->pos, "::=", 3) != 0) return parse_error(p, "expected '::='");
        p->pos += 3;
        if (parse_alternates(p, r) != 0) return -1;
        skip_space(p);
        if (peek(p) == ')') return parse_error(p, "unmatched ')'");
    }
    return 0;
}

/* ---- checking the rules ---- */

void gbnf_free(Parser *p) {
    for (int i = 0; i < p->n_rules; i++) {
        for (int a = 0; a < p->rules[i].n_alts; a++) free(p->rules[i].alts[a].items);
        free(p->rules[i].alts);
        free(p->rules[i].name);
    }
    free(p->rules);
    free(p->by_name);
    free(p->sets);
}

static bool rule_nullable(const Parser *p, const bool *nullable, int r) {
    for (int a = 0; a < p->rules[r].n_alts; a++) {
        const Seq *s = &p->rules[r].alts[a];
        bool all = true;
        for (int i = 0; i < s->n && all; i++) all = s->items[i].kind == EL_REF && nullable[s->items[i].arg];
        if (all) return true;
    }
    return false;
}

/* Depth-first search over "r can begin with s" edges: colour 1 = on the
 * path, 2 = done. Returns a rule on a cycle, or -1. */
static int find_left_cycle(const Parser *p, const bool *nullable, char *colour, int r) {
    colour[r] = 1;
    for (int a = 0; a < p->rules[r].n_alts; a++) {
        const Seq *s = &p->rules[r].alts[a];
        for (int i = 0; i < s->n; i++) {
            if (s->items[i].kind != EL_REF) break;
            int t = s->items[i].arg;
            if (colour[t] == 1) return t;
            if (colour[t] == 0) {
                int c = find_left_cycle(p, nullable, colour, t);
                if (c >= 0) return c;
            }
            if (!nullable[t]) break;
        }
    }
    colour[r] = 2;
    return -1;
}

/* The names of generated rules end in " (part)": the user's rule is the prefix. */
static int check_rules(Parser *p) {
    int root = -1;
    for (int i = 0; i < p->n_rules; i++) {
        if (!p->rules[i].defined) {
            p->pos = p->rules[i].used_at;
            return parse_error(p, "undefined rule '%s'", p->rules[i].name);
        }
        if (strcmp(p->rules[i].name, "root") == 0) root = i;
    }
    if (root < 0) return fail(p->e, "the grammar has no rule 'root'");
    bool *nullable = xcalloc((size_t)p->n_rules, sizeof *nullable);
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < p->n_rules; r++)
            if (!nullable[r] && rule_nullable(p, nullable, r)) nullable[r] = changed = true;
    }
    char *colour = xcalloc((size_t)p->n_rules, 1);
    int cycle = -1;
    for (int r = 0; r < p->n_rules && cycle < 0; r++)
        if (colour[r] == 0) cycle = find_left_cycle(p, nullable, colour, r);
    free(nullable);
    free(colour);
    if (cycle >= 0) {
        char name[96];
        snprintf(name, sizeof name, "%s", p->rules[cycle].name);
        char *part = strstr(name, " (part)");
        if (part) *part = '\0';
        return fail(p->e, "rule '%s' is left-recursive (it can begin with itself), which this parser cannot run", name);
    }
    return root;
}

int gbnf_parse(Parser *p) { return parse_grammar(p) == 0 ? check_rules(p) : -1; }
